"""The Codex CLI's non-interactive JSON mode: ``codex exec --json``, prompt on stdin (``-``).

Events: ``thread.started`` (the session), ``item.started``/``item.completed`` with items
``agent_message`` (the agent's words), ``command_execution``, ``file_change``,
``reasoning``, ``error``…; a turn ends with ``turn.completed`` (usage; no cost field) or
``turn.failed``; a top-level ``error`` reports stream failures.
"""

from __future__ import annotations

from typing import Any

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentNotice,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    json_events,
)
from pokeralphd.agents.claude import usage_of


class CodexBackend(AgentBackend):
    name = "codex"
    default_command = "codex"

    def __init__(self) -> None:
        self._last_message = ""
        self._thread: str | None = None

    def argv(self, request: AgentRequest) -> list[str]:
        cfg = request.config
        argv = [self.executable(request), "exec"]
        if request.resume_session:
            argv += ["resume", request.resume_session]
        argv.append("--json")
        if request.mode == "plan":
            argv += ["--sandbox", "read-only"]
        if cfg.model:
            argv += ["-m", cfg.model]
        argv += list(cfg.extra_args)
        argv.append(request.prompt if cfg.prompt_via == "argument" else "-")
        return argv

    def missing_hint(self) -> str:
        return "install the Codex CLI (`npm install -g @openai/codex`) or set agent.command to its path"

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return json_events(line, self._parse)

    def _parse(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event.get("type")
        raw_item = event.get("item")
        item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        if kind == "thread.started":
            self._thread = event.get("thread_id")
            return [AgentStarted(self._thread, None, 0)]
        if kind == "turn.started":
            return []
        if kind == "item.started":
            if item.get("type") == "command_execution":
                return [AgentToolUse("shell", str(item.get("command", ""))[:200])]
            return []
        if kind == "item.completed":
            itype = item.get("type")
            if itype == "agent_message":
                text = str(item.get("text", ""))
                self._last_message = text
                return [AgentText(text)]
            if itype == "command_execution":
                failed = item.get("exit_code") not in (0, None)
                return [AgentToolResult(str(item.get("aggregated_output", "")), failed)]
            if itype == "file_change":
                changes = item.get("changes") or []
                paths = ", ".join(str(c.get("path", "")) for c in changes if isinstance(c, dict))
                return [AgentToolUse("file_change", paths[:200])]
            if itype == "error":
                return [AgentNotice(f"error: {item.get('message', '')}")]
            if itype in ("reasoning", "todo_list", "web_search", "mcp_tool_call"):
                return [
                    AgentToolUse(str(itype), str(item.get("text", item.get("query", "")))[:200])
                ]
            return [AgentNotice(f"item {itype!r}")]
        if kind == "turn.completed":
            return [
                AgentResult(
                    self._last_message,
                    False,
                    "success",
                    None,
                    usage_of(_codex_usage(event.get("usage"))),
                    None,
                    None,
                    self._thread,
                )
            ]
        if kind == "turn.failed":
            err = event.get("error") or {}
            message = err.get("message") if isinstance(err, dict) else str(err)
            return [
                AgentResult(
                    str(message or "turn failed"),
                    True,
                    "turn.failed",
                    None,
                    None,
                    None,
                    None,
                    self._thread,
                )
            ]
        if kind == "error":
            return [AgentNotice(f"stream error: {event.get('message', '')}")]
        return [AgentNotice(f"unknown event type {kind!r}")]


def _codex_usage(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    return {
        "input_tokens": raw.get("input_tokens", 0),
        "output_tokens": raw.get("output_tokens", 0),
        "cache_read_input_tokens": raw.get("cached_input_tokens", 0),
    }
