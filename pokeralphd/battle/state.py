"""The in-memory state of one active battle, shared by its runner and the control methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio

if TYPE_CHECKING:
    from pokeralphd.domain.models import Battle, Progress

StopReason = Literal["cancel", "shutdown", "pause_now"]


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

    @property
    def task_id(self) -> str:
        return self.battle.task_id

    def wake_for_resume(self) -> None:
        self.resume_event.set()
        self.resume_event = anyio.Event()
