"""Agent backends behind one small interface: claude, codex, command, demo, local."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.agents.base import AgentBackend, AgentOutcome, AgentRequest
from pokeralphd.agents.runner import run_agent

if TYPE_CHECKING:
    from pokeralphd.domain.models import AgentConfig

__all__ = ["AgentBackend", "AgentOutcome", "AgentRequest", "get_backend", "run_agent"]


def get_backend(config: AgentConfig) -> AgentBackend:
    """The backend the configuration names (a fresh one per run: parsers keep state)."""
    from pokeralphd.agents.claude import ClaudeBackend
    from pokeralphd.agents.codex import CodexBackend
    from pokeralphd.agents.command import CommandBackend
    from pokeralphd.agents.demo import DemoBackend
    from pokeralphd.agents.local import LocalBackend

    backends: dict[str, type[AgentBackend]] = {
        "claude": ClaudeBackend,
        "codex": CodexBackend,
        "command": CommandBackend,
        "demo": DemoBackend,
        "local": LocalBackend,
    }
    return backends[config.backend]()
