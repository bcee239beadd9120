"""The **local** backend: the local-model agent (:mod:`pokeralph_agent`) as a child.

It runs ``python -m pokeralph_agent --stream-json …``, which speaks Claude Code's
stream-json exactly: the prompt as a stream-json user message on stdin, the events on
stdout, and, in an execution run, every tool call that needs approval asked over the
stdio control channel (``control_request`` ``can_use_tool``). So the claude parser reads
it unchanged, and the runner and the PermissionRouter decide its calls with the approval
rules and the inbox, as they do Claude Code's: the daemon stays the one place that
applies rules in a battle. A planning run offers the model only the reading tools.

The settings come from ``agent.model`` (required) and ``agent.local``; the API key
(``agent.local.apiKey``) goes in an ``initialize`` control request on stdin, never on the
command line or in the environment (the model's commands could read those). The session
is kept under the battle's folder (``.pokeralph/battles/{taskId}/sessions/``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pokeralphd.agents.claude import ClaudeBackend
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.errors import AgentError

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig
    from pokeralphd.agents.base import AgentEvent, AgentRequest

MODULE = "pokeralph_agent"


class LocalBackend(ClaudeBackend):
    name = "local"
    default_command = "pokeralph-agent"

    def executable(self, request: AgentRequest) -> str:
        return sys.executable

    def can_route(self, config: AgentConfig) -> bool:
        return True  # its stream-json front always takes the prompt as a message

    def auth_hint(self) -> str:
        return (
            "the model server refused the key: set it with `pokeralphctl config set "
            "agent.local.apiKey KEY`, or unset it if the server wants none"
        )

    def argv(self, request: AgentRequest) -> list[str]:
        cfg = request.config
        local = cfg.local
        if not cfg.model:
            raise AgentError(
                "the local backend needs a model: `pokeralphctl config set agent.model "
                "qwen2.5-coder:7b` (a model your server has: `ollama pull qwen2.5-coder:7b`)",
                field="agent.model",
            )
        argv = [
            self.executable(request),
            "-m",
            MODULE,
            "--stream-json",
            "--api",
            local.api,
            "--base-url",
            local.base_url,
            "--model",
            cfg.model,
            "--max-turns",
            str(local.max_turns),
            "--context-messages",
            str(local.context_messages),
            "--timeout",
            f"{local.timeout_seconds:g}",
            "--permission-mode",
            "plan" if request.mode == "plan" else "default",
            "-C",
            str(request.cwd),
        ]
        if self.routes_permissions(request):
            argv += ["--permission-prompt-tool", "stdio"]
        if local.fetch_webpage:
            argv.append("--fetch-webpage")
        if not local.default_rules:
            argv.append("--no-default-rules")
        folder = self.session_dir(request)
        if folder is not None:
            argv += ["--session-dir", str(folder)]
        return argv

    @staticmethod
    def session_dir(request: AgentRequest) -> Path | None:
        """The battle's ``sessions`` folder, when this run is a battle's iteration."""
        root = request.env.get("POKERALPH_REPO_PATH")
        task = request.env.get("POKERALPH_TASK_ID")
        if not root or not task:
            return None
        return Path(root) / ".pokeralph" / "battles" / validate_task_id(task) / "sessions"

    def stdin_bytes(self, request: AgentRequest) -> bytes | None:
        lines = b""
        key = request.config.local.api_key
        if key:
            init = {
                "type": "control_request",
                "request_id": "req_0_init",
                "request": {"subtype": "initialize", "hooks": None, "apiKey": key},
            }
            lines += json.dumps(init).encode() + b"\n"
        message = {
            "type": "user",
            "message": {"role": "user", "content": request.prompt},
            "parent_tool_use_id": None,
            "session_id": "",
        }
        return lines + json.dumps(message, ensure_ascii=False).encode() + b"\n"

    def missing_hint(self) -> str:
        return "the local agent ships with pokeralph; reinstall the package"

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return super().parse_line(line)
