"""The agent loop: send the conversation, run the tool calls of the reply, send their
results back, until the model answers without a tool call or ``max_turns`` replies.

Whatever the model sends, the loop goes on and tells the model what was wrong: a tool
that does not exist, arguments that are not JSON or not of the tool's schema, a path
outside the working directory, a call refused. A model repeating the same call is told
so with the result, and stopped by ``max_turns`` (stop reason ``max_turns``). Only a
failing model server ends a run early (:class:`ChatError`, stop reason ``error``).

Every step is recorded in the session (saved after each reply and each batch of
results), and told to a front-end (:class:`Events`): the terminal, or Claude Code's
stream-json in a battle.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pokeralph_agent.errors import (
    ApiStatusError,
    ChatError,
    ServerUnreachable,
    ToolError,
)
from pokeralph_agent.output import cap
from pokeralph_agent.session import Message, ToolCall, ToolResult, trim
from pokeralph_agent.toolspec import BY_NAME, ToolSpec, check_arguments
from pokeralph_core.timeutil import utcnow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pokeralph_agent.chat import ChatClient, Reply, ToolCallRequest
    from pokeralph_agent.session import ApprovalMethod, Session, SessionStore
    from pokeralph_agent.tools import Toolbox

StopReason = Literal["end_turn", "max_turns", "error", "stopped"]
REPEAT_WARNING = 3  # identical calls in a row before the model is told


@dataclass(frozen=True)
class Approval:
    allowed: bool
    method: ApprovalMethod
    message: str = ""
    rule_id: str | None = None


class Approver(Protocol):
    async def __call__(self, call: ToolCall, spec: ToolSpec) -> Approval: ...


class Events(Protocol):
    """What the loop tells its front-end, as it happens."""

    def text(self, piece: str) -> None: ...

    def assistant(self, message: Message, reply: Reply) -> None: ...

    def tool_result(self, call: ToolCall, result: ToolResult, shown: str) -> None: ...


@dataclass
class Outcome:
    stop_reason: StopReason
    text: str = ""  # the model's last words
    error: str | None = None
    error_status: int | None = None
    # the server's doing, worth trying again later: unreachable, 5xx, 429, a broken or
    # silent connection (not a reply in the wrong format, nor a 4xx)
    transient: bool = False
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    api_ms: int = 0
    denials: list[ToolCall] = field(default_factory=list)


@dataclass
class AgentLoop:
    client: ChatClient
    toolbox: Toolbox
    approver: Approver
    events: Events
    store: SessionStore
    tools: Sequence[ToolSpec]
    max_turns: int = 50
    context_messages: int = 100
    _repeat: tuple[str, int] = ("", 0)

    async def run(self, session: Session, prompt: str, outcome: Outcome | None = None) -> Outcome:
        """One run: ``prompt`` as a user message, then turns until the model is done.
        ``outcome`` (when given) is filled as the run goes, so a caller that stops the run
        still has what happened."""
        out = outcome if outcome is not None else Outcome("end_turn")
        session.status = "active"
        session.stop_reason = session.error = None
        session.messages.append(Message(role="user", content=prompt))
        self.store.save(session)
        schemas = [tool.schema() for tool in self.tools]
        offered = {tool.name: tool for tool in self.tools}
        while True:
            if out.turns >= self.max_turns:
                out.stop_reason = "max_turns"
                return out
            self._trim(session)
            began = time.monotonic()
            try:
                reply = await self.client.chat(session.messages, schemas, self.events.text)
            except ChatError as exc:
                out.stop_reason, out.error = "error", exc.message
                out.error_status = getattr(exc, "status", None)
                out.transient = isinstance(exc, ServerUnreachable) or (
                    isinstance(exc, ApiStatusError) and (exc.status is None or exc.retryable)
                )
                return out
            finally:
                out.api_ms += int((time.monotonic() - began) * 1000)
            out.turns += 1
            session.turns += 1
            out.input_tokens += reply.input_tokens
            out.output_tokens += reply.output_tokens
            session.usage.input_tokens += reply.input_tokens
            session.usage.output_tokens += reply.output_tokens
            message = self._assistant(reply)
            session.messages.append(message)
            self.events.assistant(message, reply)
            self.store.save(session)
            if not reply.tool_calls:
                out.text = reply.text
                out.stop_reason = "end_turn"
                return out
            for request, call in zip(reply.tool_calls, message.tool_calls, strict=True):
                result, shown = await self._execute(request, call, offered)
                if call.status == "rejected":
                    out.denials.append(call)
                session.messages.append(Message(role="tool", content=shown, tool_call_id=call.id))
                session.tool_results.append(result)
                self.events.tool_result(call, result, shown)
            self.store.save(session)

    def _trim(self, session: Session) -> None:
        messages, results = trim(session, self.context_messages)
        self.store.archive(session, messages, results)

    @staticmethod
    def _assistant(reply: Reply) -> Message:
        calls = [
            ToolCall(
                id=req.id[:200],
                tool_name=req.name[:200],
                parameters=req.arguments if isinstance(req.arguments, dict) else {},
            )
            for req in reply.tool_calls
        ]
        content = reply.text
        if not content and not calls:
            content = "(the model sent an empty reply)"
        metadata: dict[str, Any] = {
            "model": reply.model,
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "finish_reason": reply.finish_reason,
        }
        if reply.notes:
            metadata["notes"] = list(reply.notes)
        return Message(role="assistant", content=content, tool_calls=calls, metadata=metadata)

    async def _execute(
        self, request: ToolCallRequest, call: ToolCall, offered: dict[str, ToolSpec]
    ) -> tuple[ToolResult, str]:
        began = time.monotonic()

        def failed(error: str, output: str = "") -> tuple[ToolResult, str]:
            call.status = "failed" if call.status != "rejected" else "rejected"
            result = ToolResult(
                tool_call_id=call.id,
                success=False,
                output=output,
                error=error,
                execution_time_ms=int((time.monotonic() - began) * 1000),
            )
            return result, (output if output else f"Error: {error}")

        spec = offered.get(request.name)
        if spec is None:
            known = ", ".join(offered)
            why = "is not offered in this session" if request.name in BY_NAME else "does not exist"
            return failed(f"the tool {request.name!r} {why}; the tools are: {known}")
        if request.error is not None:
            return failed(f"{request.name}: {request.error}")
        try:
            args = check_arguments(spec, request.arguments)
        except ValueError as exc:
            return failed(str(exc))
        call.parameters = args
        repeat = self._repeated(spec.name, args)
        if spec.asks:
            approval = await self.approver(call, spec)
        else:
            approval = Approval(True, "auto")
        call.approval_method = approval.method
        call.approval_rule_id = approval.rule_id
        if not approval.allowed:
            call.status = "rejected"
            reason = approval.message or "the user denied this call"
            return failed(f"permission denied: {reason}")
        call.status = "approved"
        try:
            done = await self.toolbox.run(spec.name, args)
        except ToolError as exc:
            return failed(exc.message)
        except Exception as exc:  # a bug in a tool must not end the run
            return failed(f"{spec.name} failed unexpectedly: {type(exc).__name__}: {exc}")
        call.executed_at = utcnow()
        call.status = "executed" if done.success else "failed"
        shown = cap(done.output, keep=done.keep)
        text = shown.text
        if repeat >= REPEAT_WARNING:
            text += (
                f"\n[you made this exact call {repeat} times in a row; its result will not "
                "change: do something else, or finish]"
            )
        meta = dict(done.metadata)
        if shown.truncated:
            meta.update(
                truncated=True, total_bytes=shown.total_bytes, total_lines=shown.total_lines
            )
        result = ToolResult(
            tool_call_id=call.id,
            success=done.success,
            output=shown.text,
            error=None if done.success else (done.error or "failed"),
            execution_time_ms=int((time.monotonic() - began) * 1000),
            files_affected=done.files_affected,
            metadata=meta,
        )
        return result, text

    def _repeated(self, name: str, args: dict[str, object]) -> int:
        key = name + json.dumps(args, sort_keys=True)  # parsed JSON: always encodes
        count = self._repeat[1] + 1 if self._repeat[0] == key else 1
        self._repeat = (key, count)
        return count
