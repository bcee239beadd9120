"""``battle.start`` with ``all``: every ready task, in priority order, as room allows.

While such a run is on, each battle that ends makes room: :meth:`StartAll.fill` starts
what became ready (a pending task whose ``dependsOn`` all completed), until nothing is
ready and nothing runs. The starts that fit are made side by side, not one after
another. A task that cannot start is left as it was, said once in ``battles_scheduled``,
and not tried again by the same run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from pokeralphd.battle.judging import sole
from pokeralphd.domain.statuses import TaskStatus
from pokeralphd.errors import InvalidParams, NotFound, PokeralphError
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.results import BattleStartResult

if TYPE_CHECKING:
    from pokeralphd.battle.state import ActiveBattle
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)


class Starter(Protocol):
    """What scheduling needs of a repository's battles."""

    repo: RepoStore

    def battle_of(self, task_id: str) -> ActiveBattle | None: ...

    def occupied(self) -> int:
        """Battles active or starting."""
        ...

    def busy(self) -> bool:
        """Anything active or starting."""
        ...

    async def start(
        self, task_id: str, mode: str | None, max_iterations: int | None
    ) -> BattleStartResult: ...


class StartAll:
    """One repository's ``start all`` run, if one is on."""

    def __init__(self, orch: Starter) -> None:
        self.orch = orch
        self._auto: dict[str, Any] | None = None  # the run's mode and bound, while on
        self._fill_lock = anyio.Lock()

    @property
    def on(self) -> bool:
        return self._auto is not None

    async def start_all(self, mode: str | None, max_iterations: int | None) -> BattleStartResult:
        """Start every ready pending task in priority order up to ``parallelBattles``;
        the rest start as battles end (until nothing is ready and nothing runs)."""
        if max_iterations is not None and not 0 < max_iterations <= 100:
            raise InvalidParams("maxIterations must be between 1 and 100", field="maxIterations")
        prd, _ = await self.orch.repo.prd()
        if prd is None:
            raise NotFound(f"{self.orch.repo.name} has no PRD yet", repo=self.orch.repo.name)
        self._auto = {"mode": mode, "maxIterations": max_iterations}
        started, refused = await self._fill_now()
        waiting = [t for t in await self._pending_ids() if t not in refused]
        done = not started and not self.orch.busy()
        if done:
            self._auto = None
        self._scheduled(started, waiting, refused, done)
        first = self.orch.battle_of(started[0]) if started else None
        return BattleStartResult(
            battle=first.battle.dump() if first is not None else None,
            queued=any(
                active.queued for t in started if (active := self.orch.battle_of(t)) is not None
            ),
            started=started,
            waiting=waiting,
            refused=refused,
        )

    def _scheduled(
        self, started: list[str], waiting: list[str], refused: dict[str, str], done: bool
    ) -> None:
        self.orch.repo.publish(
            ev.BattlesScheduled(started=started, waiting=waiting, refused=refused, done=done), None
        )

    async def _pending_ids(self) -> list[str]:
        prd, _ = await self.orch.repo.prd()
        tasks = sorted(prd.tasks if prd else [], key=lambda t: (t.priority, t.id))
        return [
            t.id
            for t in tasks
            if t.status == TaskStatus.PENDING and self.orch.battle_of(t.id) is None
        ]

    async def _ready(self) -> list[str]:
        prd, _ = await self.orch.repo.prd()
        if prd is None:
            return []
        done = {t.id for t in prd.tasks if t.status == TaskStatus.COMPLETED}
        tasks = sorted(prd.tasks, key=lambda t: (t.priority, t.id))
        return [
            t.id
            for t in tasks
            if t.status == TaskStatus.PENDING
            and self.orch.battle_of(t.id) is None
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
        config = await self.orch.repo.config()
        while (room := config.parallel_battles - self.orch.occupied()) > 0:
            ready = [t for t in await self._ready() if t not in refused]
            if not ready:
                break
            # as many as there is room for, side by side (each start makes a worktree
            # and writes: one after another, the last of ten waited for all the others)
            batch = ready[:room]
            why = await self._start_side_by_side(batch, auto)
            for task_id in batch:  # in priority order
                if (reason := why.get(task_id)) is None:
                    started.append(task_id)
                else:
                    refused[task_id] = reason
        return started, dict(refused)

    async def _start_side_by_side(
        self, batch: list[str], auto: dict[str, Any]
    ) -> dict[str, str | None]:
        """Start ``batch`` at once; for each task, None or why it was refused."""
        why: dict[str, str | None] = {}

        async def start(task_id: str) -> None:
            try:
                await self.orch.start(task_id, auto["mode"], auto["maxIterations"])
            except PokeralphError as exc:
                log.warning("%s: cannot start %s: %s", self.orch.repo.name, task_id, exc)
                why[task_id] = str(exc)[:500]
            else:
                why[task_id] = None

        try:
            async with anyio.create_task_group() as tg:
                for task_id in batch:
                    tg.start_soon(start, task_id)
        except BaseExceptionGroup as group:
            raise sole(group) from None
        return why

    async def fill(self) -> None:
        """A battle ended while ``start all`` is on: start what became ready; when
        nothing runs and nothing could start, the run is over."""
        async with self._fill_lock:
            if self._auto is None:
                return
            try:
                started, refused = await self._fill_now()
            except Exception:
                log.exception("%s: scheduling the next battles failed", self.orch.repo.name)
                started, refused = [], {}
            done = not self.orch.busy()
            if done:
                self._auto = None
            if started or done:
                waiting = [t for t in await self._pending_ids() if t not in refused]
                self._scheduled(started, waiting, refused, done)
