"""Agent backends behind one small interface: claude, codex, command, demo, local, and
any Agent Client Protocol agent (acp; gemini, opencode, qwen by name).

The interface is :mod:`pokeralphd.agents.base`, running one is
:func:`pokeralphd.agents.runner.run_agent`. This package imports neither, so that the
agent programs inside it (``python -m pokeralphd.agents.demo_agent``) start with the
standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig
    from pokeralphd.agents.base import AgentBackend

__all__ = ["get_backend"]


def get_backend(config: AgentConfig) -> AgentBackend:
    """The backend the configuration names (a fresh one per run: parsers keep state)."""
    from pokeralphd.agents.acp import acp_backend
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
    if config.backend in ("acp", "gemini", "opencode", "qwen"):
        return acp_backend(config.backend)
    return backends[config.backend]()
