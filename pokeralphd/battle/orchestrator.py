"""BattleOrchestrator: one repository's battles: start them, route control to them,
persist them.

It is the only writer of ``battles/{taskId}/history.json`` and ``progress.json``. Up to
the config's ``parallelBattles`` battles per repository may be active (pending, queued,
running, paused, awaiting approval, blocked or escalated), keyed by task id; each has one
owner, a :class:`~pokeralphd.battle.run.BattleRun`, whose runner lives in the engine's
task group. A control call finds the battle's run and asks it (a command, never a flag);
every status change is checked against the battle state machine and mirrored on the task
by the seed's mapping. The rooms beside it: :mod:`~pokeralphd.battle.queries` (read-only
views), :mod:`~pokeralphd.battle.scheduler` (``start all``),
:mod:`~pokeralphd.battle.recovery` (after a restart).

Parallel battles (issue 14): with ``parallelBattles`` 1 (the default) a battle runs in
the repository's own working tree, as always. Above 1 *every* battle runs in a worktree
of its own (:mod:`pokeralphd.battle.worktrees`), so none touches the tree the user edits
and they are alike; its branch is merged back when it completes (a conflict escalates to
a person), and the worktree is removed when it ends (both :mod:`~pokeralphd.battle.landing`). A control call without a task id
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

from pokeralph_core import safefs
from pokeralph_core.config.model import ExecutionMode
from pokeralph_core.timeutil import now_iso, utcnow
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.runner import check_executable
from pokeralphd.battle import worktrees
from pokeralphd.battle.commands import Stop
from pokeralphd.battle.gitservice import GitService
from pokeralphd.battle.landing import WorktreeLanding
from pokeralphd.battle.phases import open_escalation
from pokeralphd.battle.queries import BattleQueries
from pokeralphd.battle.run import BattleRun
from pokeralphd.battle.scheduler import StartAll
from pokeralphd.battle.state import ActiveBattle
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.domain.models import Battle, PhaseCycles, Progress
from pokeralphd.domain.statuses import (
    BATTLE_TO_PROGRESS_STATUS,
    TERMINAL_BATTLE_STATUSES,
    BattleStatus,
    TaskStatus,
    check_battle_transition,
    check_progress_transition,
    task_path_for_battle,
)
from pokeralphd.errors import (
    BattleActive,
    InvalidParams,
    InvalidState,
    NoBattle,
    NotFound,
    PokeralphError,
)
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.results import (
    BattleApproveResult,
    BattlePauseResult,
    BattleResult,
    BattleStartResult,
    BattleSummary,
    RepoBattle,
    RevertResult,
)

if TYPE_CHECKING:
    from pokeralph_core.config.model import Config
    from pokeralphd.battle.state import BattleHost
    from pokeralphd.domain.models import Escalation, EscalationAction, Task
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
        self.battles: dict[str, BattleRun] = {}  # the active battles' owners, by task id
        self.write_lock = anyio.Lock()
        # battle.start is checked and reserved under this lock, so two starts at once
        # cannot both pass the "room for another battle" check (nor start one task twice).
        self._start_lock = anyio.Lock()
        self._starting: set[str] = set()  # the tasks a start is being prepared for
        self.landing = WorktreeLanding(repo, self.publish, self.save)
        self.queries = BattleQueries(repo, self.battle_of)
        self.schedule = StartAll(self)

    # ------------------------------------------------------------------ who is active
    def runs(self) -> list[BattleRun]:
        """The active battles' owners, in the order they started."""
        return list(self.battles.values())

    def actives(self) -> list[ActiveBattle]:
        """The active battles' states (to read), in the order they started."""
        return [run.state for run in self.battles.values()]

    def battle_of(self, task_id: str) -> ActiveBattle | None:
        run = self.battles.get(task_id)
        return run.state if run is not None else None

    def occupied(self) -> int:
        return len(self.battles) + len(self._starting)

    def busy(self) -> bool:
        return bool(self.battles or self._starting)

    def adopt(self, active: ActiveBattle) -> BattleRun:
        """Own ``active`` from now on (a new battle, or one found after a restart)."""
        run = self.battles[active.task_id] = BattleRun(self, active)
        return run

    # ------------------------------------------------------------------ guards
    def ensure_task_editable(self, task_id: str) -> None:
        if task_id in self._starting:
            raise BattleActive(f"a battle for {task_id} is starting", taskId=task_id)
        active = self.battle_of(task_id)
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
            active = self.runs()[0].state
            names = ", ".join(self.battles)
            raise BattleActive(
                f"a battle for {names} is active in {self.repo.name}; cancel it first",
                taskId=active.task_id,
                status=active.battle.status.value,
            )

    def summary(self) -> BattleSummary | None:
        """The first active battle in brief (see :meth:`summaries` for all of them)."""
        actives = self.actives()
        return BattleSummary(**self._summary(actives[0])) if actives else None

    def summaries(self) -> list[RepoBattle]:
        """Every active battle in brief, with its repository's name."""
        return [RepoBattle(repo=self.repo.name, **self._summary(a)) for a in self.actives()]

    def _summary(self, active: ActiveBattle) -> dict[str, Any]:
        """The fields of a :class:`BattleSummary` (and of a :class:`RepoBattle`)."""
        b = active.battle
        escalation = open_escalation(active)
        return {
            "task_id": b.task_id,
            "status": b.status,
            "iteration": active.progress.current_iteration,
            "mode": b.mode,
            "max_iterations": b.max_iterations,
            "cost_usd": float(round(b.cost_usd, 6)),  # a float on the wire, even when 0
            "paused_reason": b.paused_reason,
            "phase": b.phase,
            "phases": list(b.phases),
            "verification_cycle": b.verification.count,
            "review_cycle": b.review.count,
            "blocked_reason": b.blocked.reason if b.blocked else None,
            "retry_at": _seconds(b.blocked.retry_at) if b.blocked else None,
            "escalation": escalation.dump() if escalation else None,
            "warnings": list(active.warnings),
            "worktree": b.worktree.path if b.worktree else None,
            "branch": b.worktree.branch if b.worktree else None,
        }

    def _resolve(self, task_id: str | None) -> BattleRun:
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
            return self.runs()[0]
        run = self.battles.get(task_id)
        if run is None:
            names = sorted(self.battles)
            raise NoBattle(
                f"no active battle for {task_id} in {self.repo.name} (active: {', '.join(names)})",
                taskId=task_id,
                active=names[0] if len(names) == 1 else names,
            )
        return run

    # ------------------------------------------------------------------ persistence
    def publish(self, event: ev.TaskEvent) -> None:
        self.repo.publish(event, event.task_id)

    async def save(
        self, active: ActiveBattle, *, progress: bool = True, history: bool = True
    ) -> None:
        """Write what changed of the battle; one writer, serialised, durable on return.

        history.json is written only when the battle's record differs from what the
        file holds (a progress tick leaves it alone); progress.json whenever
        ``progress`` is asked for. Neither file is read again: the store keeps both in
        memory while the battle goes on (and re-reads one only if it changed on disk).
        ``history=False``: the caller knows the record is unchanged (an agent's
        progress tick: whatever changes the record saves it), so it is not even encoded
        to be compared (the whole battle, every iteration of it).
        """
        async with self.write_lock:
            with anyio.CancelScope(shield=True):
                files = self.repo.battle_files(active.task_id)
                if history:
                    await files.history.save(active.battle, files.bodies.body(active.battle))
                if progress:
                    active.progress.last_update = utcnow()
                    await files.progress.save(active.progress)
                if active.battle.status in TERMINAL_BATTLE_STATUSES:
                    self.repo.forget_battle_files(active.task_id)
        if progress:
            self.publish(ev.ProgressUpdate(task_id=active.task_id, progress=active.progress.dump()))

    async def set_status(self, active: ActiveBattle, status: BattleStatus, **changes: Any) -> None:
        """Move the battle (and its task, by the mapping) to ``status`` and persist it."""
        battle = active.battle
        check_battle_transition(battle.status, status)
        for key, value in changes.items():  # first: the new status may require them (error)
            setattr(battle, key, value)
        battle.status = status
        if status in TERMINAL_BATTLE_STATUSES:
            await self.end_worktree(active)
            self.release(active)  # a new battle may start as soon as this one is over
            battle.completed_at = utcnow()
            battle.duration_ms = int(
                (battle.completed_at - battle.started_at).total_seconds() * 1000
            )
        progress = active.progress
        progress.status = check_progress_transition(
            progress.status, BATTLE_TO_PROGRESS_STATUS[status]
        )
        if status == B.FAILED:
            active.progress.error = battle.error
        await self.save(active)
        await self.sync_task_status(active.task_id, status)
        if status in TERMINAL_BATTLE_STATUSES and self.schedule.on:
            self.host.spawn(self.schedule.fill, f"schedule {self.repo.name}")

    def release(self, active: ActiveBattle) -> None:
        run = self.battles.get(active.task_id)
        if run is not None and run.state is active:
            del self.battles[active.task_id]

    # ------------------------------------------------------------------ worktrees
    async def end_worktree(self, active: ActiveBattle) -> None:
        await self.landing.end(active)

    async def merge_back(self, active: ActiveBattle) -> str | None:
        return await self.landing.merge_back(active)

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
    ) -> BattleStartResult:
        validate_task_id(task_id)
        if max_iterations is not None and not 0 < max_iterations <= 100:
            raise InvalidParams("maxIterations must be between 1 and 100", field="maxIterations")
        # Checked and reserved under the lock; prepared outside it (the worktree, the
        # battle's folder, its first write: git and disk under load), so the starts of
        # ``start all`` run side by side. A reserved task counts toward the limit and
        # refuses a second start and any edit until it is started or refused.
        async with self._start_lock:
            config = await self.repo.config()
            self._check_startable(task_id, config)
            self._starting.add(task_id)
        try:
            return await self._start(task_id, mode, max_iterations, config)
        finally:
            self._starting.discard(task_id)

    def _check_startable(self, task_id: str, config: Config) -> None:
        if task_id in self._starting:
            raise BattleActive(f"a battle for {task_id} is starting", taskId=task_id)
        active = self.battle_of(task_id)
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
    ) -> BattleStartResult:
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
        self.host.sandbox.check(config.sandbox)  # required and none here: refused, named
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
            run = self.adopt(active)
            await self.save(active)
        except BaseException:
            self.battles.pop(task_id, None)
            if worktree is not None:
                with anyio.CancelScope(shield=True):
                    await worktrees.remove(self.repo.path, worktree, delete_branch=False)
            raise
        if worktree is not None:
            self.publish(
                ev.WorktreeCreated(
                    task_id=task_id,
                    path=worktree.path,
                    branch=worktree.branch,
                    from_=worktree.base_branch,
                )
            )
        self.host.launch(run)
        return BattleStartResult(battle=battle.dump(), queued=active.queued)

    async def _unmet_dependencies(self, task: Task) -> list[str]:
        if not task.depends_on:
            return []
        prd, _ = await self.repo.prd()
        status = {t.id: t.status for t in prd.tasks} if prd else {}
        return [d for d in task.depends_on if status.get(d) != TaskStatus.COMPLETED]

    async def _check_agent(self, config: Config) -> None:
        """Refuse to start when the agent's program cannot be started (missing, not
        executable, no agent.command for the command backend): the same AgentError, with
        the install hint, the first iteration would end with, before anything is written,
        so the task is left as it was."""
        backend = get_backend(config.agent)
        request = AgentRequest(prompt="", cwd=self.repo.path, mode="execute", config=config.agent)
        await anyio.to_thread.run_sync(check_executable, backend, request)

    async def pause(self, task_id: str | None, now: bool) -> BattlePauseResult:
        run = self._resolve(task_id)
        if not run.pause(now):
            return BattlePauseResult(battle=run.state.battle.dump())
        return BattlePauseResult(battle=run.state.battle.dump(), pause_requested=True)

    async def resume(self, task_id: str | None) -> BattleResult:
        run = self._resolve(task_id)
        run.resume()
        return BattleResult(battle=run.state.battle.dump())

    async def cancel(self, task_id: str | None) -> BattleResult:
        run = self._resolve(task_id)
        return await self._cancel(run)

    async def _cancel(self, run: BattleRun, answer: Escalation | None = None) -> BattleResult:
        run.stop(Stop("cancel"), answer)
        with anyio.fail_after(60):
            await run.finished.wait()
        return BattleResult(battle=run.state.battle.dump())

    async def approve(
        self, task_id: str | None, approve: bool, note: str | None
    ) -> BattleApproveResult:
        run = self._resolve(task_id)
        run.approve(approve, note)
        return BattleApproveResult(battle=run.state.battle.dump(), approved=approve)

    async def resolve_escalation(
        self,
        task_id: str | None,
        number: int | None,
        action: EscalationAction,
        guidance: str | None,
        delivery_id: str | None = None,
    ) -> BattleResult:
        """A person's answer to the open escalation (seed 003: not idempotent): recorded
        in the battle's record at once, acted on by the runner once; a second answer,
        or one to an escalation already answered, is refused."""
        run = self._resolve(task_id)
        active = run.state
        escalation = run.record_answer(number, action, guidance, delivery_id)
        assert escalation.resolution is not None
        await self.save(active, progress=False)
        self.publish(
            ev.EscalationResolved(
                task_id=active.task_id,
                escalation=escalation.number,
                action=action,
                guidance=escalation.resolution.guidance,
                delivery_id=delivery_id,
            )
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
            return await self._cancel(run, escalation)
        run.answered()
        return BattleResult(battle=active.battle.dump())

    async def revert(self, task_id: str) -> RevertResult:
        """Undo the task's last PokéRalph commit with a revert commit."""
        active = self.battle_of(task_id)
        if active is not None and active.battle.status == B.RUNNING:
            raise InvalidState(
                "pause or cancel the battle before reverting its commit", taskId=task_id
            )
        task, _ = await self.repo.task(task_id)
        git = GitService(self.repo.path)
        prefix = git.format_commit_message(task_id, "").rstrip(": ").rstrip()
        new_hash = await anyio.to_thread.run_sync(git.revert_last, prefix)
        self.publish(ev.BattleReverted(task_id=task_id, commit_hash=new_hash, title=task.title))
        return RevertResult(task_id=task_id, revert_commit=new_hash)


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)


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
