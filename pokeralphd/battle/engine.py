"""BattleEngine: the daemon-wide side of battles.

It attaches a :class:`BattleOrchestrator` to each repository, owns the task group
where battle runners live, limits how many battles run at once (the rest wait, visible as
``queued``), recovers battles a previous daemon left behind, and at shutdown stops every
agent and leaves running battles paused so ``battle.resume`` continues them.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.battle.commands import Stop
from pokeralphd.battle.governor import RateGovernor
from pokeralphd.battle.orchestrator import BattleOrchestrator
from pokeralphd.battle.recovery import recover
from pokeralphd.clock import SYSTEM_CLOCK
from pokeralphd.protocol.results import EngineSummary
from pokeralphd.sandbox.service import SandboxService

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine
    from pathlib import Path

    from anyio.abc import TaskGroup, TaskStatus

    from pokeralphd.battle.state import (
        ApprovalHook,
        CostHook,
        EscalationHook,
        FailureHook,
        Runnable,
    )
    from pokeralphd.ports import Clock, Inbox
    from pokeralphd.proc import ProcessOwner
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)


class BattleEngine:
    def __init__(
        self,
        max_concurrent: int,
        *,
        owner: ProcessOwner | None = None,
        socket_path: str = "",
        clock: Clock = SYSTEM_CLOCK,
        worktree_root: Path | None = None,
        sandbox: SandboxService | None = None,
    ) -> None:
        # rate limits seen by any battle hold every battle on the same endpoint
        self.governor = RateGovernor(clock)
        self._clock = clock
        self._slots = anyio.Semaphore(max_concurrent)
        self.waiting = 0
        self._tg: TaskGroup | None = None
        self._pending: list[tuple[Runnable, bool]] = []
        self.approval_hooks: list[ApprovalHook] = []
        self.failure_hooks: list[FailureHook] = []
        self.escalation_hooks: list[EscalationHook] = []
        self.cost_hooks: list[CostHook] = []
        # what was spent today (UTC), by repository or in all: the daemon's ledger
        self.spend: Callable[[str | None], float] = lambda _repo: 0.0
        self.owner = owner  # the daemon's mark on agents and feedback loops
        self.socket_path = socket_path  # what agents call back on (pokeralphctl deliver)
        self.sandbox = sandbox or SandboxService(enabled=False)  # where runs execute
        self.orchestrators: dict[str, BattleOrchestrator] = {}
        self.worktree_root = worktree_root  # parallel battles' worktrees (issue 14)
        self._spawned: list[tuple[Callable[[], Coroutine[Any, Any, None]], str]] = []

    @property
    def clock(self) -> Clock:
        """What battle timeouts, backoffs and the governor run on (tests put a FakeClock)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._clock = self.governor.clock = clock

    def spent_today(self, repo: str | None) -> float:
        return self.spend(repo)

    # -- slots
    def slot_free(self) -> bool:
        return self._slots.value > 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._slots.release()

    # -- runners
    def launch(self, run: Runnable, paused: bool = False) -> None:
        if self._tg is None:
            self._pending.append((run, paused))
        else:
            self._tg.start_soon(run.run, paused, name=f"battle {run!r}")

    def spawn(self, func: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        if self._tg is None:
            self._spawned.append((func, name))
        else:
            self._tg.start_soon(func, name=name)

    # -- repositories
    def attach(self, repo: RepoStore, inbox: Inbox) -> BattleOrchestrator:
        orch = BattleOrchestrator(repo, self, inbox)
        self.orchestrators[repo.name] = orch
        return orch

    def detach(self, orch: BattleOrchestrator) -> None:
        """Forget a repository's orchestrator (refused while a battle is active)."""
        orch.ensure_idle()
        self.orchestrators.pop(orch.repo.name, None)

    # -- lifecycle
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for orch in list(self.orchestrators.values()):
                if orch.repo.failure is None:
                    try:
                        await recover(orch)
                    except Exception:
                        log.exception("recovering battles of %s failed", orch.repo.name)
            for run, paused in self._pending:
                self.launch(run, paused)
            self._pending.clear()
            for func, name in self._spawned:
                tg.start_soon(func, name=name)
            self._spawned.clear()
            task_status.started()
            await anyio.sleep_forever()

    async def stop(self) -> None:
        """Stop every runner: agents are ended, running battles are left paused."""
        runs = [run for orch in self.orchestrators.values() for run in orch.runs()]
        for run in runs:
            run.stop(Stop("shutdown"))
        with anyio.move_on_after(30):
            for run in runs:
                await run.finished.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def summary(self) -> EngineSummary:
        return EngineSummary(slots_free=self._slots.value, waiting=self.waiting)
