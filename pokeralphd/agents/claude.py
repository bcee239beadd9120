"""Claude Code in print mode with ``--output-format stream-json --verbose``.

The prompt goes on stdin, which is then closed. Each stdout line is one JSON event keyed
by ``type``: ``system`` (``init`` carries the session id; ``permission_denied`` a tool
call the CLI refused itself, nobody asked), ``assistant`` (text and tool_use blocks), ``user`` (tool results, which echo files: never searched for signals),
``rate_limit_event`` (printed on every run with subscription auth: ``allowed`` is no news,
``rejected`` carries the reset), ``result`` (subtype, is_error, cost, turns, usage; a failed
API call adds ``api_error_status`` and ``api_error_type``, e.g. 429 ``rate_limit_error``,
with no rate_limit_event under API-key auth). Anything else is a notice, never an error.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentNotice,
    AgentPermissionDenied,
    AgentPermissionRequest,
    AgentRateLimit,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    Flag,
    PermissionAnswer,
    json_events,
    merge_flags,
)
from pokeralphd.domain.models import Usage

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig

PLANNING_TOOLS = "Read,Grep,Glob"  # what a planning run may use: reading only
MAX_DENIALS = 500  # entries of a result's permission_denials read, at most
QUIET_SYSTEM = {
    "hook_started",
    "hook_response",
    "status",
    "task_started",
    "task_progress",
    "compact_boundary",
}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_of(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_creation_input_tokens=_int(raw.get("cache_creation_input_tokens")),
        cache_read_input_tokens=_int(raw.get("cache_read_input_tokens")),
        reasoning_output_tokens=_int(raw.get("reasoning_output_tokens")),
    )


def tool_summary(name: str, tool_input: Any) -> str:
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "description", "prompt"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return value.replace("\n", " ")[:200]
        return json.dumps(tool_input, ensure_ascii=False)[:200]
    return str(tool_input)[:200]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


class ClaudeBackend(AgentBackend):
    name = "claude"
    default_command = "claude"

    def can_route(self, config: AgentConfig) -> bool:
        # The stdio control channel (tests/fakes/CLAUDE-PERMISSIONS.md): the prompt goes
        # as a stream-json user message and stdin stays open for the answers.
        return config.prompt_via == "stdin"

    def unrouted(self, config: AgentConfig) -> str:
        return f"the {self.name} backend with promptVia argument"

    def argv(self, request: AgentRequest) -> list[str]:
        cfg = request.config
        argv = [self.executable(request), "-p", "--output-format", "stream-json", "--verbose"]
        if request.mode == "plan":
            # Planning reads the repository and changes nothing: only the reading tools
            # exist, and anything else is refused without asking. Not ``--permission-mode
            # plan``: that tells the model to save its plan under ~/.claude/plans and to
            # end with ExitPlanMode (which print mode disables), fighting the <prd>
            # protocol (checked against the real CLI 2.1.330: tests/real).
            defaults = [
                Flag(("--permission-mode",), ("dontAsk",)),
                Flag(("--tools",), (PLANNING_TOOLS,)),
            ]
        else:
            defaults = [Flag(("--permission-mode",), ("acceptEdits",))]
        if self.routes_permissions(request):
            argv += ["--input-format", "stream-json", "--permission-prompt-tool", "stdio"]
        if cfg.model:
            defaults.append(Flag(("--model",), (cfg.model,)))
        if request.resume_session:
            argv += ["--resume", request.resume_session]
        # A user's own --permission-mode or --model replaces ours.
        argv += merge_flags(defaults, cfg.extra_args)
        if cfg.prompt_via == "argument":
            argv.append(request.prompt)
        return argv

    def stdin_bytes(self, request: AgentRequest) -> bytes | None:
        if not self.routes_permissions(request):
            return super().stdin_bytes(request)
        message = {
            "type": "user",
            "message": {"role": "user", "content": request.prompt},
            "parent_tool_use_id": None,
            "session_id": "",
        }
        return json.dumps(message, ensure_ascii=False).encode() + b"\n"

    def permission_response(self, request_id: str, answer: PermissionAnswer) -> bytes:
        decision: dict[str, Any] = (
            {"behavior": "allow", "updatedInput": answer.updated_input or {}}
            if answer.allow
            else {"behavior": "deny", "message": answer.message or "denied"}
        )
        line = {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": decision},
        }
        return json.dumps(line, ensure_ascii=False).encode() + b"\n"

    def missing_hint(self) -> str:
        return (
            "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or set "
            "agent.command to its path (`pokeralphctl config set agent.command /path/to/claude`)"
        )

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return json_events(line, self._parse)

    def _parse(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event.get("type")
        if kind == "system":
            if event.get("subtype") == "init":
                return [AgentStarted(event.get("session_id"), event.get("model"), 0)]
            if event.get("subtype") == "permission_denied":
                return [_denied(event, event.get("message") or event.get("decision_reason"))]
            if event.get("subtype") in QUIET_SYSTEM:
                return []
            return [AgentNotice(f"system {event.get('subtype')}")]
        if kind == "assistant":
            out: list[AgentEvent] = []
            for block in (event.get("message") or {}).get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    out.append(AgentText(block["text"]))
                elif block.get("type") == "tool_use":
                    name = str(block.get("name", "tool"))
                    tool_input = block.get("input")
                    out.append(
                        AgentToolUse(
                            name,
                            tool_summary(name, tool_input),
                            _str_or_none(block.get("id")),
                            tool_input if isinstance(tool_input, dict) else None,
                        )
                    )
            return out
        if kind == "user":
            out = []
            content = (event.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append(
                        AgentToolResult(
                            _result_text(block.get("content")),
                            bool(block.get("is_error")),
                            _str_or_none(block.get("tool_use_id")),
                        )
                    )
            return out
        if kind == "rate_limit_event":
            info = event.get("rate_limit_info") or {}
            resets = info.get("resetsAt")
            return [
                AgentRateLimit(
                    str(info.get("status", "unknown")),
                    float(resets) if isinstance(resets, int | float) else None,
                    info.get("rateLimitType"),
                )
            ]
        if kind == "result":
            cost = event.get("total_cost_usd")
            text = event.get("result")
            status = event.get("api_error_status")
            error_type = event.get("api_error_type")
            denials = event.get("permission_denials")
            return [
                *(
                    _denied(d, None)
                    for d in (denials if isinstance(denials, list) else [])[:MAX_DENIALS]
                    if isinstance(d, dict)
                ),
                AgentResult(
                    text=text if isinstance(text, str) else "",
                    is_error=bool(event.get("is_error")),
                    subtype=event.get("subtype"),
                    cost_usd=float(cost) if isinstance(cost, int | float) and cost >= 0 else None,
                    usage=usage_of(event.get("usage")),
                    num_turns=event.get("num_turns")
                    if isinstance(event.get("num_turns"), int)
                    else None,
                    duration_ms=event.get("duration_ms")
                    if isinstance(event.get("duration_ms"), int)
                    else None,
                    session_id=event.get("session_id"),
                    api_error_status=status
                    if isinstance(status, int) and not isinstance(status, bool)
                    else None,
                    api_error_type=error_type if isinstance(error_type, str) else None,
                ),
            ]
        if kind == "stream_event":
            return []
        if kind == "control_request":
            return [_control_request(event)]
        if kind == "control_response":
            # The answer to a control request of ours (the local agent's ``initialize``,
            # which carries its API key): not output, and never shown.
            return []
        return [AgentNotice(f"unknown event type {kind!r}")]


def _str_or_none(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value else None


def _denied(event: dict[str, Any], message: Any) -> AgentPermissionDenied:
    """A refusal nobody was asked about: ``system``/``permission_denied`` (it carries the
    message), or an entry of the result's ``permission_denials`` (tool and input only)."""
    return AgentPermissionDenied(
        str(event.get("tool_name") or "tool")[:200],
        _str_or_none(event.get("tool_use_id")),
        message[:2000] if isinstance(message, str) else "",
    )


def _control_request(event: dict[str, Any]) -> AgentEvent:
    """A ``can_use_tool`` ask; any other control request is a notice."""
    request = event.get("request") or {}
    request_id = event.get("request_id")
    if request.get("subtype") != "can_use_tool" or not isinstance(request_id, str):
        return AgentNotice(f"control request {request.get('subtype')!r} not handled")
    tool_input = request.get("input")
    return AgentPermissionRequest(
        request_id,
        str(request.get("tool_name") or "tool"),
        tool_input if isinstance(tool_input, dict) else {},
        str(request.get("description") or ""),
        _str_or_none(request.get("tool_use_id")),
    )
