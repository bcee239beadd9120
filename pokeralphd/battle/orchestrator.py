"""BattleOrchestrator: one repository's battles: start, control, inspect, recover.

It is the only writer of ``battles/{taskId}/history.json`` and ``progress.json``. One
battle per repository may be active (pending, queued, running, paused or awaiting
approval); its runner (``battle.runner``) lives in the engine's task group. Control
methods change the shared :class:`ActiveBattle` and wake or cancel the runner; every
status change is checked against the battle state machine and mirrored on the task by
the seed's mapping.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.agents import AgentRequest, get_backend
from pokeralphd.agents.runner import check_executable
from pokeralphd.battle.gitservice import GitService
from pokeralphd.battle.state import ActiveBattle
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.domain.models import Battle, Iteration, Progress
from pokeralphd.domain.statuses import (
    TERMINAL_BATTLE_STATUSES,
    BattleStatus,
    ExecutionMode,
    IterationResult,
    ProgressStatus,
    TaskStatus,
    check_battle_transition,
    task_path_for_battle,
)
from pokeralphd.domain.timeutil import now_iso, utcnow
from pokeralphd.errors import BattleActive, InvalidParams, InvalidState, NoBattle, NotFound
from pokeralphd.proc import end_recorded
from pokeralphd.store import safefs

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.battle.state import BattleHost
    from pokeralphd.domain.models import Config
    from pokeralphd.ports import Inbox
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)
ACTIVE = frozenset(set(BattleStatus) - TERMINAL_BATTLE_STATUSES)
B = BattleStatus


class BattleOrchestrator:
    def __init__(self, repo: RepoStore, host: BattleHost, inbox: Inbox) -> None:
        self.repo = repo
        self.host = host
        self.inbox = inbox
        self.active: ActiveBattle | None = None
        self.write_lock = anyio.Lock()
        # battle.start is checked and reserved under this lock, so two starts at once
        # cannot both pass the "no active battle" check.
        self._start_lock = anyio.Lock()
        self._starting: str | None = None  # the task a start is being prepared for

    # ------------------------------------------------------------------ guards
    def ensure_task_editable(self, task_id: str) -> None:
        if self._starting == task_id:
            raise BattleActive(f"a battle for {task_id} is starting", taskId=task_id)
        if self.active is not None and self.active.task_id == task_id:
            raise BattleActive(
                f"task {task_id} is in a battle ({self.active.battle.status}); "
                "cancel it first (`pokeralphctl battle cancel`)",
                taskId=task_id,
            )

    def ensure_idle(self) -> None:
        if self._starting is not None:
            raise BattleActive(
                f"a battle for {self._starting} is starting in {self.repo.name}",
                taskId=self._starting,
            )
        if self.active is not None:
            raise BattleActive(
                f"a battle for {self.active.task_id} is active in {self.repo.name}; cancel it first",
                taskId=self.active.task_id,
                status=self.active.battle.status.value,
            )

    def summary(self) -> dict[str, Any] | None:
        if self.active is None:
            return None
        b = self.active.battle
        return {
            "taskId": b.task_id,
            "status": b.status.value,
            "iteration": self.active.progress.current_iteration,
            "mode": b.mode.value,
            "maxIterations": b.max_iterations,
            "costUsd": round(b.cost_usd, 6),
            "pausedReason": b.paused_reason,
            "warnings": list(self.active.warnings),
        }

    def _resolve(self, task_id: str | None) -> ActiveBattle:
        active = self.active
        if active is None:
            raise NoBattle(f"no active battle in {self.repo.name}", repo=self.repo.name)
        if task_id is not None and task_id != active.task_id:
            raise NoBattle(
                f"the active battle in {self.repo.name} is for {active.task_id}, not {task_id}",
                taskId=task_id,
                active=active.task_id,
            )
        return active

    # ------------------------------------------------------------------ persistence
    def publish(self, type_: str, payload: dict[str, Any], task_id: str) -> None:
        self.repo.publish(type_, {"taskId": task_id, **payload}, task_id)

    async def save(self, active: ActiveBattle, *, progress: bool = True) -> None:
        """Write what changed of the battle; one writer, serialised, durable on return.

        history.json is written only when the battle's record differs from what the
        file holds (a progress tick leaves it alone); progress.json whenever
        ``progress`` is asked for. Neither file is read again: the store keeps both in
        memory while the battle goes on (and re-reads one only if it changed on disk).
        """
        async with self.write_lock:
            with anyio.CancelScope(shield=True):
                files = self.repo.battle_files(active.task_id)
                await files.history.save(active.battle)
                if progress:
                    active.progress.last_update = utcnow()
                    await files.progress.save(active.progress)
                if active.battle.status in TERMINAL_BATTLE_STATUSES:
                    self.repo.forget_battle_files(active.task_id)
        if progress:
            self.publish("progress_update", {"progress": active.progress.dump()}, active.task_id)

    async def set_status(self, active: ActiveBattle, status: BattleStatus, **changes: Any) -> None:
        """Move the battle (and its task, by the mapping) to ``status`` and persist it."""
        battle = active.battle
        check_battle_transition(battle.status, status)
        for key, value in changes.items():  # first: the new status may require them (error)
            setattr(battle, key, value)
        battle.status = status
        if status in TERMINAL_BATTLE_STATUSES:
            self.release(active)  # a new battle may start as soon as this one is over
            battle.completed_at = utcnow()
            battle.duration_ms = int(
                (battle.completed_at - battle.started_at).total_seconds() * 1000
            )
        pmap = {
            B.RUNNING: ProgressStatus.IN_PROGRESS,
            B.AWAITING_APPROVAL: ProgressStatus.AWAITING_APPROVAL,
            B.COMPLETED: ProgressStatus.COMPLETED,
            B.FAILED: ProgressStatus.FAILED,
        }
        active.progress.status = pmap.get(status, ProgressStatus.IDLE)
        if status == B.FAILED:
            active.progress.error = battle.error
        await self.save(active)
        await self.sync_task_status(active.task_id, status)

    def release(self, active: ActiveBattle) -> None:
        if self.active is active:
            self.active = None

    async def sync_task_status(self, task_id: str, status: BattleStatus) -> None:
        try:
            task, _ = await self.repo.task(task_id)
        except NotFound:
            return
        except Exception:  # the task was deleted or the PRD is broken: the battle goes on
            log.warning("cannot update task %s status", task_id, exc_info=True)
            return
        for step in task_path_for_battle(task.status, status):
            await self.repo.update_task(task_id, {"status": step.value}, None)

    # ------------------------------------------------------------------ control
    async def start(
        self, task_id: str, mode: str | None, max_iterations: int | None
    ) -> dict[str, Any]:
        validate_task_id(task_id)
        if max_iterations is not None and not 0 < max_iterations <= 100:
            raise InvalidParams("maxIterations must be between 1 and 100", field="maxIterations")
        async with self._start_lock:
            self._check_startable(task_id)
            self._starting = task_id
            try:
                return await self._start(task_id, mode, max_iterations)
            finally:
                self._starting = None

    def _check_startable(self, task_id: str) -> None:
        if self.active is not None:
            if self.active.task_id == task_id and self.active.battle.status == B.PAUSED:
                raise BattleActive(
                    f"the battle for {task_id} is paused; resume it with `pokeralphctl battle resume`",
                    taskId=task_id,
                )
            self.ensure_idle()

    async def _start(
        self, task_id: str, mode: str | None, max_iterations: int | None
    ) -> dict[str, Any]:
        task, _ = await self.repo.task(task_id)
        if task.status == TaskStatus.COMPLETED:
            raise InvalidState(f"task {task_id} is already completed", taskId=task_id)
        if task.status == TaskStatus.PLANNING:
            raise InvalidState(f"task {task_id} is being planned", taskId=task_id)
        config = await self.repo.config()
        await self._check_agent(config)
        files = self.repo.files
        previous = await self.repo.io(files.load_history, task_id)
        attempt = previous.value.attempt + 1 if previous else 1
        if previous:
            await self.repo.io(_archive_attempt, files.battle_dir(task_id), previous.value.attempt)
        await self.repo.io(files.create_battle_folder, task_id)
        battle = Battle(
            task_id=task_id,
            status=B.PENDING,
            started_at=utcnow(),
            mode=ExecutionMode(mode) if mode else config.mode,
            max_iterations=max_iterations or config.max_iterations_per_task,
            attempt=attempt,
        )
        active = ActiveBattle(battle, Progress(task_id=task_id), task.title)
        self.active = active
        await self.save(active)
        self.host.launch(self, active)
        return {"battle": battle.dump(), "queued": active.queued}

    async def _check_agent(self, config: Config) -> None:
        """Refuse to start when the agent's program cannot be started (missing, not
        executable, no agent.command for the command backend): the same AgentError, with
        the install hint, the first iteration would end with, before anything is written,
        so the task is left as it was."""
        backend = get_backend(config.agent)
        request = AgentRequest(prompt="", cwd=self.repo.path, mode="execute", config=config.agent)
        await anyio.to_thread.run_sync(check_executable, backend, request)

    async def pause(self, task_id: str | None, now: bool) -> dict[str, Any]:
        active = self._resolve(task_id)
        if active.stopping:
            raise InvalidState(
                f"the battle for {active.task_id} is being "
                + ("cancelled" if active.stop_reason == "cancel" else "stopped"),
                taskId=active.task_id,
            )
        status = active.battle.status
        if status == B.PAUSED:
            return {"battle": active.battle.dump()}
        if status in (B.PENDING, B.QUEUED, B.AWAITING_APPROVAL) or (now and status == B.RUNNING):
            active.pause_requested = True
            if now and active.iteration_scope is not None and active.request_stop("pause_now"):
                active.iteration_scope.cancel()
            active.approval_event.set()  # an approval wait ends as a pause
        elif status == B.RUNNING:
            active.pause_requested = True  # takes effect at the end of the running iteration
        return {"battle": active.battle.dump(), "pauseRequested": True}

    async def resume(self, task_id: str | None) -> dict[str, Any]:
        active = self._resolve(task_id)
        if active.battle.status != B.PAUSED:
            raise InvalidState(
                f"the battle for {active.task_id} is {active.battle.status}, not paused",
                status=active.battle.status.value,
            )
        active.pause_requested = False
        active.wake_for_resume()
        return {"battle": active.battle.dump()}

    async def cancel(self, task_id: str | None) -> dict[str, Any]:
        active = self._resolve(task_id)
        active.request_stop("cancel")
        active.runner_scope.cancel()
        with anyio.fail_after(60):
            await active.finished.wait()
        return {"battle": active.battle.dump()}

    async def approve(self, task_id: str | None, approve: bool, note: str | None) -> dict[str, Any]:
        active = self._resolve(task_id)
        if active.battle.status != B.AWAITING_APPROVAL:
            raise InvalidState(
                f"the battle for {active.task_id} is {active.battle.status}, not awaiting approval",
                status=active.battle.status.value,
            )
        active.approved = approve
        active.approval_note = note
        if not approve:
            active.pause_requested = True
        active.approval_event.set()
        return {"battle": active.battle.dump(), "approved": approve}

    async def revert(self, task_id: str) -> dict[str, Any]:
        """Undo the task's last PokéRalph commit with a revert commit."""
        active = self.active
        if active is not None and active.task_id == task_id and active.battle.status == B.RUNNING:
            raise InvalidState(
                "pause or cancel the battle before reverting its commit", taskId=task_id
            )
        task, _ = await self.repo.task(task_id)
        git = GitService(self.repo.path)
        prefix = git.format_commit_message(task_id, "").rstrip(": ").rstrip()
        new_hash = await anyio.to_thread.run_sync(git.revert_last, prefix)
        self.publish("battle_reverted", {"commitHash": new_hash, "title": task.title}, task_id)
        return {"taskId": task_id, "revertCommit": new_hash}

    # ------------------------------------------------------------------ inspection
    async def history(self, task_id: str) -> dict[str, Any]:
        validate_task_id(task_id)
        if self.active is not None and self.active.task_id == task_id:
            return {"battle": self.active.battle.dump()}
        loaded = await self.repo.io(self.repo.files.load_history, task_id)
        return {
            "battle": loaded.value.dump() if loaded else None,
            "version": loaded.version if loaded else 0,
        }

    async def diff(self, task_id: str, iteration: int | None, limit: int) -> dict[str, Any]:
        """The diff of the commit an iteration made (default: the latest that made one)."""
        history = await self.history(task_id)
        iterations = history["battle"]["iterations"] if history["battle"] else []
        committed = [i for i in iterations if i.get("commitHash")]
        if iteration is not None:
            committed = [i for i in committed if i["number"] == iteration]
        if not committed:
            which = f"iteration {iteration}" if iteration is not None else "any iteration"
            raise NotFound(
                f"{task_id}: {which} made no commit", taskId=task_id, iteration=iteration
            )
        chosen = committed[-1]
        git = GitService(self.repo.path)
        text, truncated = await anyio.to_thread.run_sync(git.show, chosen["commitHash"], limit)
        return {
            "taskId": task_id,
            "iteration": chosen["number"],
            "commit": chosen["commitHash"],
            "diff": text,
            "truncated": truncated,
        }

    async def progress(self, task_id: str) -> dict[str, Any]:
        validate_task_id(task_id)
        if self.active is not None and self.active.task_id == task_id:
            return {"progress": self.active.progress.dump()}
        loaded = await self.repo.io(self.repo.files.load_progress, task_id)
        return {"progress": loaded.value.dump() if loaded else None}

    async def log(
        self, task_id: str, iteration: int | None, offset: int | None, tail: int | None, limit: int
    ) -> dict[str, Any]:
        validate_task_id(task_id)
        files = self.repo.files
        if iteration is None:
            history = await self.history(task_id)
            iterations = history["battle"]["iterations"] if history["battle"] else []
            current = (
                self.active.progress.current_iteration
                if self.active and self.active.task_id == task_id
                else 0
            )
            iteration = max([i["number"] for i in iterations] + [current]) or None
            if iteration is None:
                raise NotFound(f"no iteration log for {task_id} yet", taskId=task_id)
        if not 0 < limit <= 4 << 20:
            raise InvalidParams("limit must be between 1 and 4194304 bytes", field="limit")
        path = files.log_path(task_id, iteration)
        if not await self.repo.io(safefs.is_file, path):
            raise NotFound(
                f"no log for {task_id} iteration {iteration}", taskId=task_id, iteration=iteration
            )
        if tail is not None:
            data, size = await self.repo.io(_tail_lines, path, tail, limit)
            start = size - len(data)
        else:
            data, size = await self.repo.io(files.read_log, task_id, iteration, offset or 0, limit)
            start = max(0, size + (offset or 0)) if (offset or 0) < 0 else min(offset or 0, size)
        return {
            "iteration": iteration,
            "data": data.decode("utf-8", errors="replace"),
            "offset": start,
            "nextOffset": start + len(data),
            "size": size,
        }

    # ------------------------------------------------------------------ recovery
    async def recover(self) -> None:
        """After a restart: settle battles the previous daemon left active; leave them paused."""
        files = self.repo.files
        for task_id in await self.repo.io(files.battle_task_ids):
            try:
                loaded = await self.repo.io(files.load_history, task_id)
                progress = await self.repo.io(files.load_progress, task_id)
            except Exception as exc:
                log.error("%s: cannot recover battle %s: %s", self.repo.name, task_id, exc)
                continue
            if loaded is None or loaded.value.status in TERMINAL_BATTLE_STATUSES:
                continue
            battle = loaded.value
            prog = progress.value if progress else Progress(task_id=task_id)
            if prog.agent_pid:
                await anyio.to_thread.run_sync(end_recorded, prog.agent_pid, prog.agent_started)
            recorded = {i.number for i in battle.iterations}
            if prog.current_iteration and prog.current_iteration not in recorded:
                battle.iterations.append(
                    Iteration(
                        number=prog.current_iteration,
                        started_at=prog.last_update,
                        ended_at=utcnow(),
                        result=IterationResult.CANCELLED,
                        error="the daemon stopped during this iteration",
                    )
                )
            task = await self._task_title(task_id)
            active = ActiveBattle(battle, prog, task)
            prog.agent_pid = prog.agent_started = None
            reason = "the daemon restarted; resume with `pokeralphctl battle resume`"
            if battle.status != B.PAUSED:
                check_battle_transition(battle.status, B.PAUSED)
                battle.status = B.PAUSED
            battle.paused_reason = reason
            prog.status = ProgressStatus.IDLE
            if self.active is None:
                self.active = active
                await self.save(active)
                await self.sync_task_status(task_id, B.PAUSED)
                self.publish("battle_paused", {"reason": reason, "recovered": True}, task_id)
                self.host.launch(self, active, paused=True)

    async def _task_title(self, task_id: str) -> str:
        try:
            task, _ = await self.repo.task(task_id)
        except Exception:
            return task_id
        return task.title


def _archive_attempt(folder: Path, attempt: int) -> None:
    """Keep an earlier attempt's history and logs beside the new battle's (never through
    a link planted in the battle folder)."""
    with safefs.folder(folder) as fd:
        for name, new in (
            ("history.json", f"history-{attempt}.json"),
            ("logs", f"logs-{attempt}"),
        ):
            if safefs.entry_kind(fd, name) is None:
                continue
            target = new if safefs.entry_kind(fd, new) is None else f"{new}.{now_iso()}"
            os.replace(name, target, src_dir_fd=fd, dst_dir_fd=fd)


def _tail_lines(path: Path, lines: int, limit: int) -> tuple[bytes, int]:
    with os.fdopen(safefs.open_file(path, os.O_RDONLY), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read()
    if lines <= 0:
        return b"", size
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
        data = b"\n".join(parts[-lines:]) + b"\n"
    else:
        data = b"\n".join(parts[-lines:])
    return data, size
