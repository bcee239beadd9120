"""BattleOrchestrator: one repository's battles: start, control, inspect, recover.

It is the only writer of ``battles/{taskId}/history.json`` and ``progress.json``. Up to
the config's ``parallelBattles`` battles per repository may be active (pending, queued,
running, paused, awaiting approval, blocked or escalated), keyed by task id; each runner
(``battle.runner``) lives in the engine's task group. Control methods change the shared
:class:`ActiveBattle` and wake or cancel the runner; every status change is checked
against the battle state machine and mirrored on the task by the seed's mapping.

Parallel battles (issue 14): with ``parallelBattles`` 1 (the default) a battle runs in
the repository's own working tree, as always. Above 1 *every* battle runs in a worktree
of its own (:mod:`pokeralphd.battle.worktrees`), so none touches the tree the user edits
and they are alike; its branch is merged back when it completes (a conflict escalates to
a person), and the worktree is removed when it ends. A control call without a task id
means "the one active battle"; with several it is refused, naming them.
``battle.start`` with ``all`` starts every ready pending task (its ``dependsOn`` all
completed) in priority order up to the limit, and keeps doing so as battles end.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.agents import get_backend
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.runner import check_executable
from pokeralphd.battle import worktrees
from pokeralphd.battle.gitservice import GitService
from pokeralphd.battle.phases import open_escalation, pending_resolution
from pokeralphd.battle.state import ActiveBattle
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.domain.models import (
    Battle,
    EscalationAction,
    EscalationResolution,
    Iteration,
    PhaseCycles,
    Progress,
)
from pokeralphd.domain.statuses import (
    TERMINAL_BATTLE_STATUSES,
    BattleStatus,
    ExecutionMode,
    IterationResult,
    ProgressStatus,
    TaskStatus,
    battle_path,
    check_battle_transition,
    task_path_for_battle,
)
from pokeralphd.domain.timeutil import now_iso, utcnow
from pokeralphd.errors import (
    BattleActive,
    InvalidParams,
    InvalidState,
    NoBattle,
    NotFound,
    PokeralphError,
)
from pokeralphd.proc import end_recorded
from pokeralphd.store import safefs

if TYPE_CHECKING:
    from pokeralphd.battle.state import BattleHost
    from pokeralphd.domain.models import Config, Task
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
        self.battles: dict[str, ActiveBattle] = {}  # the active battles, by task id
        self.write_lock = anyio.Lock()
        # battle.start is checked and reserved under this lock, so two starts at once
        # cannot both pass the "room for another battle" check.
        self._start_lock = anyio.Lock()
        self._starting: set[str] = set()  # the tasks a start is being prepared for
        self._merge_lock = anyio.Lock()  # one merge back into this repository at a time
        self._auto: dict[str, Any] | None = None  # battle.start all: its mode and bound
        self._fill_lock = anyio.Lock()

    # ------------------------------------------------------------------ who is active
    def actives(self) -> list[ActiveBattle]:
        """The active battles, in the order they started."""
        return list(self.battles.values())

    def battle_of(self, task_id: str) -> ActiveBattle | None:
        return self.battles.get(task_id)

    # ------------------------------------------------------------------ guards
    def ensure_task_editable(self, task_id: str) -> None:
        if task_id in self._starting:
            raise BattleActive(f"a battle for {task_id} is starting", taskId=task_id)
        active = self.battles.get(task_id)
        if active is not None:
            raise BattleActive(
                f"task {task_id} is in a battle ({active.battle.status}); "
                "cancel it first (`pokeralphctl battle cancel`)",
                taskId=task_id,
            )

    def ensure_idle(self) -> None:
        if self._starting:
            first = sorted(self._starting)[0]
            raise BattleActive(
                f"a battle for {first} is starting in {self.repo.name}", taskId=first
            )
        if self.battles:
            active = self.actives()[0]
            names = ", ".join(self.battles)
            raise BattleActive(
                f"a battle for {names} is active in {self.repo.name}; cancel it first",
                taskId=active.task_id,
                status=active.battle.status.value,
            )

    def summary(self) -> dict[str, Any] | None:
        """The first active battle in brief (see :meth:`summaries` for all of them)."""
        summaries = self.summaries()
        return summaries[0] if summaries else None

    def summaries(self) -> list[dict[str, Any]]:
        return [self._summary(active) for active in self.actives()]

    def _summary(self, active: ActiveBattle) -> dict[str, Any]:
        b = active.battle
        escalation = open_escalation(active)
        return {
            "taskId": b.task_id,
            "status": b.status.value,
            "iteration": active.progress.current_iteration,
            "mode": b.mode.value,
            "maxIterations": b.max_iterations,
            "costUsd": round(b.cost_usd, 6),
            "pausedReason": b.paused_reason,
            "phase": b.phase,
            "phases": list(b.phases),
            "verificationCycle": b.verification.count,
            "reviewCycle": b.review.count,
            "blockedReason": b.blocked.reason if b.blocked else None,
            "retryAt": b.blocked.retry_at if b.blocked else None,
            "escalation": escalation.dump() if escalation else None,
            "warnings": list(active.warnings),
            "worktree": b.worktree.path if b.worktree else None,
            "branch": b.worktree.branch if b.worktree else None,
        }

    def _resolve(self, task_id: str | None) -> ActiveBattle:
        if not self.battles:
            raise NoBattle(f"no active battle in {self.repo.name}", repo=self.repo.name)
        if task_id is None:
            if len(self.battles) > 1:
                names = sorted(self.battles)
                raise InvalidParams(
                    f"{len(names)} battles are active in {self.repo.name} "
                    f"({', '.join(names)}): name the task",
                    field="taskId",
                    active=names,
                )
            return self.actives()[0]
        active = self.battles.get(task_id)
        if active is None:
            names = sorted(self.battles)
            raise NoBattle(
                f"no active battle for {task_id} in {self.repo.name} (active: {', '.join(names)})",
                taskId=task_id,
                active=names[0] if len(names) == 1 else names,
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
            await self._end_worktree(active)
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
        if status in TERMINAL_BATTLE_STATUSES and self._auto is not None:
            self.host.spawn(self._fill, f"schedule {self.repo.name}")

    def release(self, active: ActiveBattle) -> None:
        if self.battles.get(active.task_id) is active:
            del self.battles[active.task_id]

    # ------------------------------------------------------------------ worktrees
    async def _end_worktree(self, active: ActiveBattle) -> None:
        """The battle ended: its worktree goes; its branch too when merged or cancelled
        (a failed battle's unmerged commits stay on it for the next attempt, an accepted
        conflict's for the person). Never fails the battle: a problem is logged."""
        worktree = active.battle.worktree
        if worktree is None or worktree.removed:
            return
        status = active.battle.status
        with anyio.CancelScope(shield=True):
            try:
                if status == B.FAILED:  # its unfinished work stays on its branch
                    await self._commit_leftovers(active)
                keep = status != B.CANCELLED and (
                    not worktree.merged and await worktrees.unmerged(self.repo.path, worktree)
                )
                await worktrees.remove(self.repo.path, worktree, delete_branch=not keep)
                worktree.removed = True
                self.publish(
                    "worktree_removed",
                    {"path": worktree.path, "branch": worktree.branch, "branchKept": keep},
                    active.task_id,
                )
            except Exception:
                log.warning(
                    "%s: cannot remove the worktree of %s",
                    self.repo.name,
                    active.task_id,
                    exc_info=True,
                )

    async def _commit_leftovers(self, active: ActiveBattle) -> None:
        worktree = active.battle.worktree
        assert worktree is not None
        message = GitService.format_commit_message(active.task_id, active.title)
        commit = await worktrees.commit_leftovers(
            worktree, f"{message}\n\nChanges the battle left uncommitted in its worktree."
        )
        if commit is not None:
            log.info("%s: committed what %s left in its worktree", self.repo.name, active.task_id)

    async def merge_back(self, active: ActiveBattle) -> str | None:
        worktree = active.battle.worktree
        if worktree is None or worktree.merged:
            return None
        config = await self.repo.config()
        # shielded: a rebase stopped halfway would leave the worktree mid-rebase (each git
        # command is bounded by its own timeout)
        with anyio.CancelScope(shield=True):
            async with self._merge_lock:
                try:
                    await self._commit_leftovers(active)
                    outcome = await worktrees.merge_back(
                        self.repo.path, worktree, config.merge_strategy
                    )
                except (worktrees.GitFailed, OSError, TimeoutError) as exc:
                    return f"merging {worktree.branch} into {worktree.base_branch} failed: {exc}"
        if not outcome.merged:
            self.publish(
                "merge_failed",
                {
                    "branch": worktree.branch,
                    "into": worktree.base_branch,
                    "reason": outcome.reason,
                    "files": outcome.files,
                    "message": outcome.message,
                },
                active.task_id,
            )
            return outcome.message
        worktree.merged = True
        worktree.merge_commit = outcome.tip
        await self.save(active, progress=False)
        self.publish(
            "battle_merged",
            {"branch": worktree.branch, "into": worktree.base_branch, "commit": outcome.tip},
            active.task_id,
        )
        return None

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
            config = await self.repo.config()
            self._check_startable(task_id, config)
            self._starting.add(task_id)
            try:
                return await self._start(task_id, mode, max_iterations, config)
            finally:
                self._starting.discard(task_id)

    def _check_startable(self, task_id: str, config: Config) -> None:
        active = self.battles.get(task_id)
        if active is not None:
            if active.battle.status == B.PAUSED:
                raise BattleActive(
                    f"the battle for {task_id} is paused; resume it with `pokeralphctl battle resume`",
                    taskId=task_id,
                )
            raise BattleActive(
                f"a battle for {task_id} is already active ({active.battle.status})",
                taskId=task_id,
                status=active.battle.status.value,
            )
        limit = config.parallel_battles
        if len(self.battles) + len(self._starting) >= limit:
            if limit == 1:
                self.ensure_idle()
            names = sorted([*self.battles, *self._starting])
            raise BattleActive(
                f"{len(names)} battles are active in {self.repo.name} ({', '.join(names)}), "
                f"the most parallelBattles allows ({limit}); cancel one or wait",
                taskId=names[0],
                active=names,
            )

    async def _start(
        self, task_id: str, mode: str | None, max_iterations: int | None, config: Config
    ) -> dict[str, Any]:
        task, _ = await self.repo.task(task_id)
        if task.status == TaskStatus.COMPLETED:
            raise InvalidState(f"task {task_id} is already completed", taskId=task_id)
        if task.status == TaskStatus.PLANNING:
            raise InvalidState(f"task {task_id} is being planned", taskId=task_id)
        unmet = await self._unmet_dependencies(task)
        if unmet:
            raise InvalidState(
                f"task {task_id} depends on {', '.join(unmet)}, not completed yet",
                taskId=task_id,
                dependsOn=unmet,
            )
        await self._check_agent(config)
        parallel = config.parallel_battles > 1
        root = self.host.worktree_root
        if parallel:
            if root is None:
                raise InvalidState("this daemon has no folder for worktrees", taskId=task_id)
            if not config.auto_commit:
                raise InvalidState(
                    "parallelBattles above 1 needs autoCommit: a worktree battle's work "
                    "reaches your branch through its commits",
                    field="autoCommit",
                )
        files = self.repo.files
        previous = await self.repo.io(files.load_history, task_id)
        attempt = previous.value.attempt + 1 if previous else 1
        worktree = None
        if parallel and root is not None:
            # made before anything is written: a refusal leaves the task as it was
            try:
                worktree = await worktrees.create(self.repo.path, root, task_id)
            except worktrees.GitFailed as exc:
                raise InvalidState(f"cannot make a worktree for {task_id}: {exc}") from exc
        try:
            if previous:
                await self.repo.io(
                    _archive_attempt, files.battle_dir(task_id), previous.value.attempt
                )
            await self.repo.io(files.create_battle_folder, task_id)
            base = await anyio.to_thread.run_sync(GitService(self.repo.path).head)
            battle = Battle(
                task_id=task_id,
                status=B.PENDING,
                started_at=utcnow(),
                mode=ExecutionMode(mode) if mode else config.mode,
                max_iterations=max_iterations or config.max_iterations_per_task,
                attempt=attempt,
                phases=list(config.phases),
                base_commit=base,
                verification=PhaseCycles(limit=config.max_verification_cycles),
                review=PhaseCycles(limit=config.max_review_cycles),
                worktree=worktree,
            )
            active = ActiveBattle(battle, Progress(task_id=task_id), task.title)
            active.workdir = Path(worktree.path) if worktree else None
            self.battles[task_id] = active
            await self.save(active)
        except BaseException:
            self.battles.pop(task_id, None)
            if worktree is not None:
                with anyio.CancelScope(shield=True):
                    await worktrees.remove(self.repo.path, worktree, delete_branch=False)
            raise
        if worktree is not None:
            self.publish(
                "worktree_created",
                {"path": worktree.path, "branch": worktree.branch, "from": worktree.base_branch},
                task_id,
            )
        self.host.launch(self, active)
        return {"battle": battle.dump(), "queued": active.queued}

    async def _unmet_dependencies(self, task: Task) -> list[str]:
        if not task.depends_on:
            return []
        prd, _ = await self.repo.prd()
        status = {t.id: t.status for t in prd.tasks} if prd else {}
        return [d for d in task.depends_on if status.get(d) != TaskStatus.COMPLETED]

    # ------------------------------------------------------------------ start all
    async def start_all(self, mode: str | None, max_iterations: int | None) -> dict[str, Any]:
        """Start every ready pending task in priority order up to ``parallelBattles``;
        the rest start as battles end (until nothing is ready and nothing runs)."""
        if max_iterations is not None and not 0 < max_iterations <= 100:
            raise InvalidParams("maxIterations must be between 1 and 100", field="maxIterations")
        prd, _ = await self.repo.prd()
        if prd is None:
            raise NotFound(f"{self.repo.name} has no PRD yet", repo=self.repo.name)
        self._auto = {"mode": mode, "maxIterations": max_iterations}
        started, refused = await self._fill_now()
        waiting = [t for t in await self._pending_ids() if t not in refused]
        done = not started and not self.battles
        if done:
            self._auto = None
        self._scheduled(started, waiting, refused, done)
        return {
            "battle": self.battles[started[0]].battle.dump()
            if started and started[0] in self.battles
            else None,
            "queued": any(self.battles[t].queued for t in started if t in self.battles),
            "started": started,
            "waiting": waiting,
            "refused": refused,
        }

    def _scheduled(
        self, started: list[str], waiting: list[str], refused: dict[str, str], done: bool
    ) -> None:
        self.repo.publish(
            "battles_scheduled",
            {"started": started, "waiting": waiting, "refused": refused, "done": done},
            None,
        )

    async def _pending_ids(self) -> list[str]:
        prd, _ = await self.repo.prd()
        tasks = sorted(prd.tasks if prd else [], key=lambda t: (t.priority, t.id))
        return [t.id for t in tasks if t.status == TaskStatus.PENDING and t.id not in self.battles]

    async def _ready(self) -> list[str]:
        prd, _ = await self.repo.prd()
        if prd is None:
            return []
        done = {t.id for t in prd.tasks if t.status == TaskStatus.COMPLETED}
        tasks = sorted(prd.tasks, key=lambda t: (t.priority, t.id))
        return [
            t.id
            for t in tasks
            if t.status == TaskStatus.PENDING
            and t.id not in self.battles
            and all(d in done for d in t.depends_on)
        ]

    async def _fill_now(self) -> tuple[list[str], dict[str, str]]:
        """Start ready tasks while there is room: the ids started, and those refused
        (with why: they are left as they were, and not tried again by this run)."""
        auto = self._auto
        if auto is None:
            return [], {}
        started: list[str] = []
        refused: dict[str, str] = auto.setdefault("refused", {})
        config = await self.repo.config()
        while len(self.battles) + len(self._starting) < config.parallel_battles:
            ready = [t for t in await self._ready() if t not in refused]
            if not ready:
                break
            task_id = ready[0]
            try:
                await self.start(task_id, auto["mode"], auto["maxIterations"])
            except PokeralphError as exc:
                log.warning("%s: cannot start %s: %s", self.repo.name, task_id, exc)
                refused[task_id] = str(exc)[:500]
                continue
            started.append(task_id)
        return started, dict(refused)

    async def _fill(self) -> None:
        """A battle ended while ``start all`` is on: start what became ready; when
        nothing runs and nothing could start, the run is over."""
        async with self._fill_lock:
            if self._auto is None:
                return
            try:
                started, refused = await self._fill_now()
            except Exception:
                log.exception("%s: scheduling the next battles failed", self.repo.name)
                started, refused = [], {}
            done = not self.battles and not self._starting
            if done:
                self._auto = None
            if started or done:
                waiting = [t for t in await self._pending_ids() if t not in refused]
                self._scheduled(started, waiting, refused, done)

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
        if status == B.ESCALATED:
            raise InvalidState(self._escalated_hint(active), taskId=active.task_id)
        if status == B.BLOCKED:  # the wait ends; back to running, then paused
            active.pause_requested = True
            active.wake_for_resume()
            return {"battle": active.battle.dump(), "pauseRequested": True}
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
        if active.battle.status == B.BLOCKED:  # retry now, without waiting out the backoff
            active.retry_now = True  # nor another battle's rate limit (the governor)
            active.wake_for_resume()
            return {"battle": active.battle.dump()}
        if active.battle.status == B.ESCALATED:
            raise InvalidState(self._escalated_hint(active), taskId=active.task_id)
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

    def _escalated_hint(self, active: ActiveBattle) -> str:
        escalation = open_escalation(active)
        where = (
            f"answer inbox item {escalation.delivery_id} "
            f"(`pokeralphctl inbox show {escalation.delivery_id}`)"
            if escalation is not None and escalation.delivery_id
            else "answer its inbox item"
        )
        return (
            f"the battle for {active.task_id} is escalated and waits for a person: {where} "
            "to retry with guidance, accept the work, or cancel"
        )

    async def resolve_escalation(
        self,
        task_id: str | None,
        number: int | None,
        action: EscalationAction,
        guidance: str | None,
        delivery_id: str | None = None,
    ) -> dict[str, Any]:
        """A person's answer to the open escalation (seed 003: not idempotent): recorded
        in the battle's record at once, acted on by the runner once; a second answer,
        or one to an escalation already answered, is refused."""
        active = self._resolve(task_id)
        battle = active.battle
        escalation = battle.escalations[-1] if battle.escalations else None
        if battle.status != B.ESCALATED or escalation is None:
            raise InvalidState(
                f"the battle for {active.task_id} is {battle.status}, not escalated",
                status=battle.status.value,
            )
        if number is not None and number != escalation.number:
            raise InvalidState(
                f"escalation {number} of {active.task_id} is not the open one "
                f"({escalation.number})",
                escalation=escalation.number,
            )
        if escalation.resolution is not None:
            raise InvalidState(
                f"escalation {escalation.number} of {active.task_id} was already answered "
                f"({escalation.resolution.action})",
                escalation=escalation.number,
            )
        # checked and recorded with no await in between: exactly one answer wins
        escalation.resolution = EscalationResolution(
            action=action,
            guidance=guidance.strip()[:8000] if guidance and guidance.strip() else None,
            at=utcnow(),
            delivery_id=delivery_id,
        )
        await self.save(active, progress=False)
        self.publish(
            "escalation_resolved",
            {
                "escalation": escalation.number,
                "action": action,
                "guidance": escalation.resolution.guidance,
                "deliveryId": delivery_id,
            },
            active.task_id,
        )
        if delivery_id is None:  # not through a hook's own question: each settles its own
            for hook in self.host.escalation_hooks:
                try:
                    await hook.answered(self, active, escalation)
                except PokeralphError as exc:  # bookkeeping: the answer stands and is acted on
                    log.warning(
                        "%s: escalation %d answered, but %s could not record it: %s",
                        active.task_id,
                        escalation.number,
                        type(hook).__name__,
                        exc.message,
                    )
        if action == "cancel":
            escalation.resolution.applied = True
            return await self.cancel(active.task_id)
        active.wake_for_resume()
        return {"battle": battle.dump()}

    async def report(self, task_id: str, phase: str, cycle: int | None) -> dict[str, Any]:
        """A verification or review report of the task's battle (default: the latest)."""
        validate_task_id(task_id)
        if phase not in ("verification", "review"):
            raise InvalidParams("phase must be verification or review", field="phase")
        if cycle is None:
            history = await self.history(task_id)
            record = history["battle"]
            cycle = record[phase]["count"] if record else 0
            if not cycle:
                raise NotFound(f"no {phase} report for {task_id} yet", taskId=task_id)
        if not 0 < cycle <= 1000:
            raise InvalidParams("cycle must be between 1 and 1000", field="cycle")
        loaded = await self.repo.io(self.repo.files.load_report, task_id, phase, cycle)
        if loaded is None:
            raise NotFound(f"no {phase} report {cycle} for {task_id}", taskId=task_id, cycle=cycle)
        return {"phase": phase, "report": loaded.value.dump(), "version": loaded.version}

    async def revert(self, task_id: str) -> dict[str, Any]:
        """Undo the task's last PokéRalph commit with a revert commit."""
        active = self.battles.get(task_id)
        if active is not None and active.battle.status == B.RUNNING:
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
        if (active := self.battles.get(task_id)) is not None:
            return {"battle": active.battle.dump()}
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
        if (active := self.battles.get(task_id)) is not None:
            return {"progress": active.progress.dump()}
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
            active = self.battles.get(task_id)
            current = active.progress.current_iteration if active else 0
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
            if loaded is None:
                continue
            if loaded.value.status in TERMINAL_BATTLE_STATUSES:
                worktree = loaded.value.worktree
                if worktree is not None and not worktree.removed:  # it ended mid-cleanup
                    ended = ActiveBattle(loaded.value, Progress(task_id=task_id), task_id)
                    await self._end_worktree(ended)
                    if worktree.removed:
                        await self.save(ended, progress=False)
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
            prog.status = ProgressStatus.IDLE
            if battle.worktree is not None and not battle.worktree.removed:
                try:
                    await worktrees.ensure(self.repo.path, battle.worktree)
                except (PokeralphError, worktrees.GitFailed, OSError) as exc:
                    log.error("%s: the worktree of %s is lost: %s", self.repo.name, task_id, exc)
                active.workdir = Path(battle.worktree.path)
            if battle.status == B.ESCALATED:
                # still waiting for a person (or answered, not yet acted on): stays so
                if task_id not in self.battles:
                    await self._recover_escalated(active)
                continue
            reason = "the daemon restarted; resume with `pokeralphctl battle resume`"
            for step in battle_path(battle.status, B.PAUSED):  # blocked: through running
                check_battle_transition(battle.status, step)
                battle.status = step
            battle.blocked = None
            battle.paused_reason = reason
            if task_id not in self.battles:
                self.battles[task_id] = active
                await self.save(active)
                await self.sync_task_status(task_id, B.PAUSED)
                self.publish("battle_paused", {"reason": reason, "recovered": True}, task_id)
                self.host.launch(self, active, paused=True)

        await self._sweep_worktrees()

    async def _sweep_worktrees(self) -> None:
        """Worktrees no battle owns (a start or an end the previous daemon did not
        finish) are removed."""
        root = self.host.worktree_root
        if root is None:
            return
        try:
            removed = await worktrees.sweep(self.repo.path, root, set(self.battles))
        except (worktrees.GitFailed, OSError, TimeoutError) as exc:
            log.warning("%s: sweeping worktrees failed: %s", self.repo.name, exc)
            return
        if removed:
            log.info("%s: removed stray worktrees %s", self.repo.name, ", ".join(removed))

    async def _recover_escalated(self, active: ActiveBattle) -> None:
        """An escalated battle after a restart: an answer recorded but not acted on is
        acted on now; else the person's inbox item is listened to again."""
        self.battles[active.task_id] = active
        await self.save(active)
        await self.sync_task_status(active.task_id, B.ESCALATED)
        if pending_resolution(active) is not None:
            self.host.launch(self, active)
            return
        escalation = open_escalation(active)
        self.host.launch(self, active, paused=True)
        if escalation is not None:
            for hook in self.host.escalation_hooks:
                await hook.reopened(self, active, escalation)

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
            ("verification", f"verification-{attempt}"),
            ("review", f"review-{attempt}"),
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
