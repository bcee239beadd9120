"""Claude Code's stream-json, spoken by the local agent in a battle, so the daemon reads
it with the claude parser unchanged (tests/fakes/CLAUDE-PERMISSIONS.md has the wire).

In (stdin): one ``user`` message (the prompt), optionally after an ``initialize``
``control_request`` (the backend sends the API key there, never on the command line or
in the environment, where the model's own commands could read it); then
``control_response`` lines answering our permission asks. Stdin closing while an ask
waits is a denial ("Stream closed"), as with the real CLI.

Out (stdout), one JSON object a line: ``system``/``init`` (session id, model, tools,
cwd); an ``assistant`` event per content block (``text``, ``tool_use`` with the whole
input); ``control_request`` ``can_use_tool`` before a tool that asks runs; a ``user``
event with each ``tool_result`` (what the model was sent, ``is_error`` when it failed);
the ``result`` (subtype ``success``, ``error_max_turns`` or ``error_during_execution``,
``is_error``, ``num_turns``, ``duration_ms``, ``usage`` with the server's token counts,
``total_cost_usd`` 0, ``permission_denials``; a failed model call adds
``api_error_status``/``api_error_type`` as Claude Code does, so a 429, a 5xx or a server
that does not answer is retried by the daemon without being counted, then pauses the
battle with the message).
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import IO, TYPE_CHECKING, Any

import anyio

from pokeralph_agent.loop import Approval
from pokeralph_agent.toolspec import READ_ONLY

if TYPE_CHECKING:
    from pokeralph_agent.chat import Reply
    from pokeralph_agent.loop import Outcome
    from pokeralph_agent.session import Message, Session, ToolCall, ToolResult
    from pokeralph_agent.toolspec import ToolSpec

MAX_STDIN_LINE = 8 << 20


class StreamJsonOut:
    """The events, written to ``out`` (stdout) one line each, flushed."""

    def __init__(self, out: IO[bytes], session: Session) -> None:
        self.out = out
        self.session = session

    def emit(self, event: dict[str, Any]) -> None:
        self.out.write(json.dumps(event, ensure_ascii=False).encode() + b"\n")
        self.out.flush()

    def init(self, tools: list[str], permission_mode: str) -> None:
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": self.session.working_dir,
                "session_id": self.session.id,
                "model": self.session.model,
                "tools": tools,
                "mcp_servers": [],
                "permissionMode": permission_mode,
                "apiKeySource": "none",
            }
        )

    def _assistant(self, block: dict[str, Any], reply: Reply) -> None:
        self.emit(
            {
                "type": "assistant",
                "message": {
                    "id": "msg_" + uuid.uuid4().hex[:24],
                    "type": "message",
                    "role": "assistant",
                    "model": reply.model or self.session.model,
                    "content": [block],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": reply.input_tokens,
                        "output_tokens": reply.output_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
                "parent_tool_use_id": None,
                "session_id": self.session.id,
            }
        )

    # -- Events
    def text(self, piece: str) -> None:
        pass  # whole blocks only (no --include-partial-messages)

    def assistant(self, message: Message, reply: Reply) -> None:
        if reply.text:
            self._assistant({"type": "text", "text": reply.text}, reply)
        for note in reply.notes:
            self.emit({"type": "system", "subtype": "notice", "message": note})
        for call, request in zip(message.tool_calls, reply.tool_calls, strict=True):
            tool_input = request.arguments if isinstance(request.arguments, dict) else {}
            self._assistant(
                {"type": "tool_use", "id": call.id, "name": call.tool_name, "input": tool_input},
                reply,
            )

    def tool_result(self, call: ToolCall, result: ToolResult, shown: str) -> None:
        self.emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": call.id,
                            "type": "tool_result",
                            "content": shown,
                            "is_error": not result.success,
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": self.session.id,
                "tool_use_result": {
                    "success": result.success,
                    "error": result.error,
                    "files_affected": result.files_affected,
                    "execution_time_ms": result.execution_time_ms,
                    "approval": call.approval_method,
                },
            }
        )

    def result(self, outcome: Outcome, duration_ms: int) -> None:
        subtype = {"max_turns": "error_max_turns", "error": "error_during_execution"}.get(
            outcome.stop_reason, "success"
        )
        event: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": outcome.stop_reason in ("error", "stopped"),
            "duration_ms": duration_ms,
            "duration_api_ms": outcome.api_ms,
            "num_turns": outcome.turns,
            "result": outcome.error if outcome.stop_reason == "error" else outcome.text,
            "session_id": self.session.id,
            "total_cost_usd": 0,
            "usage": {
                "input_tokens": outcome.input_tokens,
                "output_tokens": outcome.output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
            "permission_denials": [
                {"tool_name": c.tool_name, "tool_use_id": c.id, "tool_input": c.parameters}
                for c in outcome.denials
            ],
            "stop_reason": outcome.stop_reason,
        }
        if outcome.stop_reason == "max_turns":
            event["result"] = (
                f"stopped after {outcome.turns} model replies (agent.local.maxTurns); "
                + (outcome.text or "")
            ).strip()
        status = outcome.error_status
        if status is not None:
            event["api_error_status"] = status
        if status == 429:
            event["api_error_type"] = "rate_limit_error"
        elif outcome.transient:
            # 5xx, or no answer at all: the daemon retries after a backoff, then pauses
            # the battle with this message, without counting the iteration
            event["api_error_type"] = "api_error"
        elif status is not None:
            event["api_error_type"] = "invalid_request_error"
        self.emit(event)


class HostChannel:
    """Stdin: the prompt, then the host's answers to our permission asks."""

    def __init__(self, out: StreamJsonOut, stdin: IO[bytes] | None = None) -> None:
        self.out = out
        self.stdin = stdin if stdin is not None else sys.stdin.buffer
        self.waiting: dict[str, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self.closed = False
        self.api_key: str | None = None

    async def _line(self) -> bytes:
        return await anyio.to_thread.run_sync(
            self.stdin.readline, MAX_STDIN_LINE, abandon_on_cancel=True
        )

    async def prompt(self) -> str:
        """Read up to the first user message; its text ("" if stdin ends first)."""
        while True:
            line = await self._line()
            if not line:
                self.closed = True
                return ""
            event = _decode(line)
            if event is None:
                continue
            if event.get("type") == "control_request":
                self._host_request(event)
                continue
            if event.get("type") == "user":
                content = (event.get("message") or {}).get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return "\n".join(
                        str(b.get("text", ""))
                        for b in content
                        if isinstance(b, dict) and b.get("type") == "text"
                    )

    def _host_request(self, event: dict[str, Any]) -> None:
        request = event.get("request") or {}
        if request.get("subtype") == "initialize" and isinstance(request.get("apiKey"), str):
            self.api_key = request["apiKey"]
        self.out.emit(
            {
                "type": "control_response",
                "response": {
                    "subtype": "success",
                    "request_id": event.get("request_id"),
                    "response": {},
                },
            }
        )

    async def read_answers(self) -> None:
        """Route ``control_response`` lines to their asks until stdin closes."""
        try:
            while True:
                line = await self._line()
                if not line:
                    break
                event = _decode(line)
                if event is None:
                    continue
                if event.get("type") == "control_request":
                    self._host_request(event)
                    continue
                if event.get("type") != "control_response":
                    continue
                response = event.get("response") or {}
                waiter = self.waiting.pop(str(response.get("request_id")), None)
                if waiter is not None:
                    waiter[1].append(response)
                    waiter[0].set()
        finally:
            self.closed = True
            for done, _box in self.waiting.values():
                done.set()

    async def ask(self, call: ToolCall, spec: ToolSpec) -> Approval:
        if self.closed:
            return Approval(False, "host", "Tool permission request failed: Stream closed")
        request_id = str(uuid.uuid4())
        done = anyio.Event()
        box: list[dict[str, Any]] = []
        self.waiting[request_id] = (done, box)
        self.out.emit(
            {
                "type": "control_request",
                "request_id": request_id,
                "request": {
                    "subtype": "can_use_tool",
                    "tool_name": call.tool_name,
                    "display_name": call.tool_name,
                    "input": call.parameters,
                    "description": f"{spec.name} ({spec.risk.replace('_', ' ')})",
                    "tool_use_id": call.id,
                },
            }
        )
        await done.wait()
        if not box:
            return Approval(False, "host", "Tool permission request failed: Stream closed")
        response = box[0]
        if response.get("subtype") == "error":
            return Approval(False, "host", f"the host failed to decide: {response.get('error')}")
        decision = response.get("response") or {}
        if decision.get("behavior") == "allow":
            return Approval(True, "host")
        return Approval(False, "host", str(decision.get("message") or "denied"))


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


class BattleApprover:
    """Who decides in a battle: the host over the control channel (``routed``); in plan
    mode read-only tools run and nothing else does; with no one to ask, nothing that asks
    runs (as Claude Code refuses in print mode)."""

    def __init__(self, channel: HostChannel | None, plan: bool) -> None:
        self.channel = channel
        self.plan = plan

    async def __call__(self, call: ToolCall, spec: ToolSpec) -> Approval:
        if self.plan:
            if spec.name in READ_ONLY:
                return Approval(True, "auto")
            return Approval(False, "policy", "plan mode: only reading tools run")
        if self.channel is None:
            return Approval(
                False,
                "policy",
                f"{spec.name} needs approval and no one can be asked in this run",
            )
        return await self.channel.ask(call, spec)
