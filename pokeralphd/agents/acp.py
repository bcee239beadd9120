"""Any agent that speaks the Agent Client Protocol (ACP: JSON-RPC 2.0 over its stdio):
Gemini CLI, OpenCode, Qwen Code by name (:mod:`pokeralphd.agents.acp_presets`), any
other through ``agent.backend acp`` and ``agent.command``.

The run is a conversation, not a stream to parse (:mod:`pokeralphd.agents.acp_session`
over the peer of :mod:`pokeralphd.agents.acp_rpc`, meaning in
:mod:`pokeralphd.agents.acp_map`): the runner hands it every line and the agent's stdin.
Every run routes its permission requests (``session/request_permission`` is ACP's own
approval question), so approval rules and ``permissions.unmatched`` always apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.agents.acp_presets import PRESETS, Preset
from pokeralphd.agents.acp_session import AcpConversation
from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentNotice,
    AgentRequest,
    Conversation,
    merge_flags,
)
from pokeralphd.errors import AgentError

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig


class AcpBackend(AgentBackend):
    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        self.name = preset.name
        self.default_command = preset.program

    def can_route(self, config: AgentConfig) -> bool:
        return True

    def argv(self, request: AgentRequest) -> list[str]:
        cfg = request.config
        program = self.program(cfg)
        if not program:
            raise AgentError(
                "the acp backend needs agent.command, the ACP agent's executable "
                "(`pokeralphctl config set agent.command PATH`)",
                field="agent.command",
            )
        flags = self.preset.flags(request.mode == "plan", cfg.model)
        return [program, *self.preset.args, *merge_flags(flags, cfg.extra_args)]

    def default_env(self, request: AgentRequest) -> dict[str, str]:
        return dict(self.preset.env)

    def stdin_bytes(self, request: AgentRequest) -> bytes | None:
        return b""

    def conversation(self, request: AgentRequest) -> Conversation:
        return AcpConversation(
            request, routed=self.routes_permissions(request), auth_hint=self.auth_hint()
        )

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        # Never called: the conversation reads every line.
        return [AgentNotice(line[:200].decode("utf-8", "replace"))]

    def auth_hint(self) -> str:
        return self.preset.auth

    def missing_hint(self) -> str:
        if not self.preset.package:
            return "check agent.command (`pokeralphctl config get agent.command`)"
        return (
            f"install it (`npm install -g {self.preset.package}`) or set agent.command to "
            f"its path (`pokeralphctl config set agent.command /path/to/{self.preset.program}`)"
        )


def acp_backend(name: str) -> AcpBackend:
    return AcpBackend(PRESETS[name])
