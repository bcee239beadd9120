"""BattleEngine: the daemon-wide side of battles.

It attaches a :class:`BattleOrchestrator` to each repository runtime, owns the task group
where battle runners live, limits how many battles run at once (the rest wait, visible as
``queued``), recovers battles a previous daemon left behind, and at shutdown stops every
agent and leaves running battles paused so ``battle.resume`` continues them.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from pokeralphd.battle.orchestrator import BattleOrchestrator
from pokeralphd.battle.runner import run_battle

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from anyio.abc import TaskGroup, TaskStatus

    from pokeralphd.battle.state import ActiveBattle
    from pokeralphd.daemon import Daemon
    from pokeralphd.runtime import RepoRuntime

log = logging.getLogger(__name__)


class ApprovalHook(Protocol):
    """Told when a battle starts and stops waiting for approval (the inbox uses it)."""

    async def opened(
        self, orch: BattleOrchestrator, active: ActiveBattle, iteration: int
    ) -> None: ...

    async def closed(
        self, orch: BattleOrchestrator, active: ActiveBattle, iteration: int
    ) -> None: ...


class BattleEngine:
    def __init__(self, max_concurrent: int) -> None:
        self._slots = anyio.Semaphore(max_concurrent)
        self.waiting = 0
        self._tg: TaskGroup | None = None
        self._pending: list[tuple[BattleOrchestrator, ActiveBattle, bool]] = []
        self.approval_hooks: list[ApprovalHook] = []
        self.failure_hooks: list[Callable[[BattleOrchestrator, ActiveBattle], Awaitable[None]]] = []
        self.daemon: Daemon | None = None

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
    def launch(self, orch: BattleOrchestrator, active: ActiveBattle, paused: bool = False) -> None:
        if self._tg is None:
            self._pending.append((orch, active, paused))
        else:
            self._tg.start_soon(
                run_battle,
                orch,
                active,
                paused,
                name=f"battle {orch.runtime.name}/{active.task_id}",
            )

    # -- daemon extension protocol
    def attach(self, runtime: RepoRuntime) -> None:
        runtime.battles = BattleOrchestrator(runtime, self)

    async def detach(self, runtime: RepoRuntime) -> None:
        orch = runtime.battles
        if isinstance(orch, BattleOrchestrator):
            orch.ensure_idle()

    async def run(
        self, daemon: Daemon, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        self.daemon = daemon
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for runtime in list(daemon.runtimes.values()):
                if runtime.failure is None and isinstance(runtime.battles, BattleOrchestrator):
                    try:
                        await runtime.battles.recover()
                    except Exception:
                        log.exception("recovering battles of %s failed", runtime.name)
            for orch, active, paused in self._pending:
                self.launch(orch, active, paused)
            self._pending.clear()
            task_status.started()
            await anyio.sleep_forever()

    async def stop(self, daemon: Daemon) -> None:
        """Stop every runner: agents are ended, running battles are left paused."""
        actives: list[ActiveBattle] = []
        for runtime in daemon.runtimes.values():
            orch = runtime.battles
            if isinstance(orch, BattleOrchestrator) and orch.active is not None:
                active = orch.active
                active.stop_reason = active.stop_reason or "shutdown"
                active.runner_scope.cancel()
                actives.append(active)
        with anyio.move_on_after(30):
            for active in actives:
                await active.finished.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def summary(self) -> dict[str, Any]:
        return {"slotsFree": self._slots.value, "waiting": self.waiting}
