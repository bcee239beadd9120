"""A planning session: the one record of where turning an idea into a PRD stands.

States follow seed 004: ``idle`` → ``planning`` (the agent works, in plan mode) →
``waiting_input`` (it asked questions) → ``planning`` (an answer continues the same agent
session) → … → ``completed`` (a PRD draft came in the final turn). The daemon keeps it
in ``.pokeralph/planning/session.json`` so a restart keeps it, and returns it as is from
``planning.status``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pokeralphd.domain.models import Model

PlanningState = Literal["idle", "planning", "waiting_input", "completed"]
MAX_LAST_OUTPUT = 2000


class PlanningSession(Model):
    """``.pokeralph/planning/session.json``."""

    state: PlanningState = "idle"
    idea: str | None = None
    breakdown: bool = False
    session_id: str | None = None
    questions: list[str] = Field(default_factory=list)
    delivery_id: str | None = None
    prd: dict[str, Any] | None = None
    problems: list[Any] = Field(default_factory=list)
    error: str | None = None
    turns: int = 0
    last_output: str = ""

    @property
    def active(self) -> bool:
        """An agent turn runs or a question waits: a new session may not start."""
        return self.state in ("planning", "waiting_input")
