"""Any command-line agent: the prompt on stdin (or as the last argument), plain text out.

Every stdout line is the agent's own words, so the completion signal is looked for there;
the lines of one read come as one event (:class:`AgentLines`). The exit status decides
success.
"""

from __future__ import annotations

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentLines,
    AgentRequest,
    AgentText,
)
from pokeralphd.errors import AgentError


class CommandBackend(AgentBackend):
    name = "command"

    def argv(self, request: AgentRequest) -> list[str]:
        cfg = request.config
        if not cfg.command:
            raise AgentError(
                "the command backend needs agent.command (`pokeralphctl config set agent.command PATH`)"
            )
        argv = [cfg.command, *cfg.extra_args]
        if cfg.prompt_via == "argument":
            argv.append(request.prompt)
        return argv

    def missing_hint(self) -> str:
        return "check agent.command (`pokeralphctl config get agent.command`)"

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return [AgentText(line.decode("utf-8", errors="replace"))]

    def parse_lines(self, lines: list[bytes]) -> list[AgentEvent]:
        """The lines of one read, blank ones skipped, as one event."""
        words = [line for line in lines if line.strip()]
        if not words:
            return []
        return [AgentLines(b"\n".join(words).decode("utf-8", errors="replace").split("\n"))]
