"""A battle's live state and the interfaces the battle parts talk through.

- :class:`ActiveBattle`: the in-memory state of one active battle, shared by its runner
  and the control methods. Why a runner is being stopped is one value with a precedence
  (:meth:`ActiveBattle.request_stop`): a cancel is never downgraded to a pause.
- :class:`BattleControl`: what the runner, an iteration and the hooks may do with a
  repository's battles (persist, move the status, publish); the orchestrator is it.
- :class:`BattleHost`: what an orchestrator needs of the daemon-wide engine (slots, where
  runners run, the hooks, the mark on child processes); the engine is it.

The parts import this module, never each other's classes, so the battle package has no
import cycle: engine → orchestrator → (this), runner → iteration → (this).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from pokeralphd.domain.models import Battle, Config, Iteration, Progress
    from pokeralphd.domain.statuses import BattleStatus
    from pokeralphd.ports import Clock, Inbox
    from pokeralphd.proc import ProcessOwner
    from pokeralphd.store.repo_store import RepoStore

StopReason = Literal["cancel", "shutdown", "pause_now"]
# A stronger reason is never replaced by a weaker one: a cancel stays a cancel.
STOP_PRECEDENCE: dict[StopReason | None, int] = {
    None: 0,
    "pause_now": 1,
    "shutdown": 2,
    "cancel": 3,
}


@dataclass
class ActiveBattle:
    battle: Battle
    progress: Progress
    title: str
    runner_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    iteration_scope: anyio.CancelScope | None = None
    stop_reason: StopReason | None = None
    pause_requested: bool = False
    resume_event: anyio.Event = field(default_factory=anyio.Event)
    approval_event: anyio.Event = field(default_factory=anyio.Event)
    approved: bool = True
    approval_note: str | None = None  # passed into the next iteration's prompt
    completion_problems: list[str] = field(default_factory=list)
    finished: anyio.Event = field(default_factory=anyio.Event)
    queued: bool = False
    approval_delivery: str | None = None  # the inbox item asking for this approval
    warnings: list[str] = field(default_factory=list)  # how its config loosens safety

    @property
    def task_id(self) -> str:
        return self.battle.task_id

    @property
    def stopping(self) -> bool:
        """A cancel or a shutdown is under way: nothing else may be asked of it."""
        return STOP_PRECEDENCE[self.stop_reason] >= STOP_PRECEDENCE["shutdown"]

    def request_stop(self, reason: StopReason) -> bool:
        """Record why the runner is being stopped, unless a stronger reason is already
        recorded; True when ``reason`` is now the reason."""
        if STOP_PRECEDENCE[reason] < STOP_PRECEDENCE[self.stop_reason]:
            return False
        self.stop_reason = reason
        return True

    def clear_pause_now(self) -> None:
        """The immediate pause took effect: forget it (a stronger reason stays)."""
        if self.stop_reason == "pause_now":
            self.stop_reason = None

    def wake_for_resume(self) -> None:
        self.resume_event.set()
        self.resume_event = anyio.Event()


class BattleControl(Protocol):
    """One repository's battles, as the runner, an iteration and the hooks use them."""

    repo: RepoStore
    inbox: Inbox
    host: BattleHost

    @property
    def active(self) -> ActiveBattle | None: ...

    def publish(self, type_: str, payload: dict[str, Any], task_id: str) -> None: ...

    async def save(self, active: ActiveBattle, *, progress: bool = True) -> None: ...

    async def set_status(
        self, active: ActiveBattle, status: BattleStatus, **changes: Any
    ) -> None: ...

    def release(self, active: ActiveBattle) -> None:
        """``active`` is over: a new battle may start (the one place this happens)."""
        ...

    async def start(
        self, task_id: str, mode: str | None, max_iterations: int | None
    ) -> dict[str, Any]: ...

    async def approve(
        self, task_id: str | None, approve: bool, note: str | None
    ) -> dict[str, Any]: ...


class ApprovalHook(Protocol):
    """Told when a battle starts and stops waiting for approval (the inbox uses it)."""

    async def opened(self, orch: BattleControl, active: ActiveBattle, iteration: int) -> None: ...

    async def closed(self, orch: BattleControl, active: ActiveBattle, iteration: int) -> None: ...


class FailureHook(Protocol):
    """Told when a battle has failed (the inbox offers a retry)."""

    async def __call__(self, orch: BattleControl, active: ActiveBattle) -> None: ...


class IterationHook(Protocol):
    """Told of every iteration once it is recorded, before its end is published (the
    cost ledger uses it). A hook's failure is logged, never the battle's."""

    async def __call__(
        self, orch: BattleControl, active: ActiveBattle, record: Iteration, config: Config
    ) -> None: ...


class BattleHost(Protocol):
    """The daemon-wide side an orchestrator runs its battles on."""

    owner: ProcessOwner | None  # the daemon's mark on agents and feedback loops
    clock: Clock  # battle timeouts and pauses run on it
    socket_path: str  # what agents call back on (pokeralphctl deliver)
    approval_hooks: list[ApprovalHook]
    failure_hooks: list[FailureHook]
    iteration_hooks: list[IterationHook]
    waiting: int

    def slot_free(self) -> bool: ...

    def slot(self) -> AbstractAsyncContextManager[None]: ...

    def launch(self, orch: BattleControl, active: ActiveBattle, paused: bool = False) -> None: ...
