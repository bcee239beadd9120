"""A battle's live state and the interfaces the battle parts talk through.

- :class:`ActiveBattle`: the in-memory state of one active battle, held by its owner
  (:class:`pokeralphd.battle.run.BattleRun`) and changed by its runner and the parts the
  runner drives (an iteration, a role's run, the phases); the control handlers reach it
  only through the owner's commands. Why a runner is being stopped is one value with a
  precedence (:meth:`ActiveBattle.request_stop`): a cancel is never downgraded to a pause.
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

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from contextlib import AbstractAsyncContextManager
    from datetime import datetime
    from pathlib import Path

    import anyio

    from pokeralphd.battle.commands import Approve
    from pokeralphd.battle.governor import RateGovernor
    from pokeralphd.domain.models import (
        Battle,
        Escalation,
        EscalationAction,
        Progress,
        Usage,
    )
    from pokeralphd.domain.statuses import BattleStatus
    from pokeralphd.ports import Clock, Inbox
    from pokeralphd.proc import ProcessOwner
    from pokeralphd.protocol.events import TaskEvent
    from pokeralphd.protocol.results import BattleApproveResult, BattleResult, BattleStartResult
    from pokeralphd.sandbox.service import SandboxService
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
    iteration_scope: anyio.CancelScope | None = None  # the agent run under way, if any
    stop_reason: StopReason | None = None
    approval_note: str | None = None  # passed into the next iteration's prompt
    completion_problems: list[str] = field(default_factory=list)
    queued: bool = False
    approval_delivery: str | None = None  # the inbox item asking for this approval
    rate_limits: int = 0  # rate limits in a row, for the backoff
    warnings: list[str] = field(default_factory=list)  # how its config loosens safety
    # where the agent, the feedback loops and git work: the repository, or the battle's
    # own worktree (issue 14; None: the repository)
    workdir: Path | None = None
    budget_delivery: str | None = None  # the open inbox item about a budget cap

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


class BattleControl(Protocol):
    """One repository's battles, as the runner, an iteration and the hooks use them."""

    repo: RepoStore
    inbox: Inbox
    host: BattleHost

    def battle_of(self, task_id: str) -> ActiveBattle | None:
        """The active battle of ``task_id``, if any."""
        ...

    async def merge_back(self, active: ActiveBattle) -> str | None:
        """A worktree battle's branch goes back into the branch it started from: None
        when merged (or nothing to merge), else why not (for a person)."""
        ...

    def publish(self, event: TaskEvent) -> None: ...

    async def save(
        self, active: ActiveBattle, *, progress: bool = True, history: bool = True
    ) -> None: ...

    async def set_status(
        self, active: ActiveBattle, status: BattleStatus, **changes: Any
    ) -> None: ...

    def release(self, active: ActiveBattle) -> None:
        """``active`` is over: a new battle may start (the one place this happens)."""
        ...

    async def start(
        self, task_id: str, mode: str | None, max_iterations: int | None
    ) -> BattleStartResult: ...

    async def approve(
        self, task_id: str | None, approve: bool, note: str | None
    ) -> BattleApproveResult: ...

    async def resume(self, task_id: str | None) -> BattleResult: ...

    async def cancel(self, task_id: str | None) -> BattleResult: ...

    async def resolve_escalation(
        self,
        task_id: str | None,
        number: int | None,
        action: EscalationAction,
        guidance: str | None,
        delivery_id: str | None = None,
    ) -> BattleResult:
        """A person's answer to the open escalation: recorded once, a second refused."""
        ...


class ApprovalHook(Protocol):
    """Told when a battle starts and stops waiting for approval (the inbox uses it)."""

    async def opened(self, orch: BattleControl, active: ActiveBattle, iteration: int) -> None: ...

    async def closed(
        self, orch: BattleControl, active: ActiveBattle, iteration: int, answer: Approve | None
    ) -> None:
        """The wait is over: ``answer`` is the verdict, or None when the battle was paused."""
        ...


class FailureHook(Protocol):
    """Told when a battle has failed (the inbox offers a retry)."""

    async def __call__(self, orch: BattleControl, active: ActiveBattle) -> None: ...


class EscalationHook(Protocol):
    """Told when a battle is escalated to a person, when a restarted daemon finds it so,
    and when it leaves that state some other way (the inbox asks the person)."""

    async def opened(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None: ...

    async def reopened(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None: ...

    async def answered(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None:
        """A person answered somewhere else (``battle.resolve``): settle what was asked."""
        ...

    async def closed(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation, reason: str
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Charge:
    """What one agent run of a battle cost: an implementation iteration, or a role's run
    (verification, review) judging one."""

    phase: str
    iteration: int
    at: datetime
    backend: str
    model: str | None
    cost_usd: float | None
    usage: Usage | None


class CostHook(Protocol):
    """Told of every agent run's cost once it is recorded, before its end is published
    (the cost ledger). A hook's failure is logged, never the battle's."""

    async def __call__(self, orch: BattleControl, active: ActiveBattle, charge: Charge) -> None: ...


class Runnable(Protocol):
    """A battle's owner, as the engine runs it."""

    async def run(self, paused: bool = False) -> None: ...


class BattleHost(Protocol):
    """The daemon-wide side an orchestrator runs its battles on."""

    owner: ProcessOwner | None  # the daemon's mark on agents and feedback loops
    clock: Clock  # battle timeouts and pauses run on it
    socket_path: str  # what agents call back on (pokeralphctl deliver)
    sandbox: SandboxService  # where each run of a battle executes (issue 23)
    worktree_root: Path | None  # where parallel battles' worktrees live (None: nowhere)
    approval_hooks: list[ApprovalHook]
    failure_hooks: list[FailureHook]
    escalation_hooks: list[EscalationHook]
    cost_hooks: list[CostHook]
    governor: RateGovernor  # one rate limit holds every battle on its endpoint

    def spent_today(self, repo: str | None) -> float:
        """What one repository (or, with None, every one) spent today (UTC), per the
        ledger."""
        ...

    waiting: int

    def slot_free(self) -> bool: ...

    def slot(self) -> AbstractAsyncContextManager[None]: ...

    def launch(self, run: Runnable, paused: bool = False) -> None:
        """Run ``run`` in the engine's task group (paused: it waits for a resume first)."""
        ...

    def spawn(self, func: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Run ``func`` in the engine's task group (a scheduler's step, off the caller)."""
        ...
