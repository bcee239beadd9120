"""The bundled **demo** agent backend: an offline stand-in for the quickstart.

It runs ``pokeralphd.agents.demo_agent``, which speaks Claude Code's stream-json (so the
demo exercises the real claude parser) and really edits the sample repository. It is a
demo, not an agent: it only knows how to finish the sample task. ``agent.extraArgs`` go to
it as they are (``["--pace", "0"]`` drops its pause between events).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pokeralphd.agents.claude import ClaudeBackend

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig
    from pokeralphd.agents.base import AgentEvent, AgentRequest


class DemoBackend(ClaudeBackend):
    name = "demo"

    def argv(self, request: AgentRequest) -> list[str]:
        return [sys.executable, "-m", "pokeralphd.agents.demo_agent", *request.config.extra_args]

    def stdin_bytes(self, request: AgentRequest) -> bytes | None:
        return request.prompt.encode()

    def can_route(self, config: AgentConfig) -> bool:
        return False  # the scripted demo asks for nothing

    def missing_hint(self) -> str:
        return "the demo agent ships with pokeralph; reinstall the package"

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return super().parse_line(line)
