"""Ollama's native chat API: ``POST {baseUrl}/api/chat`` with ``stream: true``.

The body streams NDJSON, one object a line: ``message.content`` pieces with
``done: false``; a tool call arrives whole in ``message.tool_calls``
(``{"function": {"name": …, "arguments": {…}}}``, arguments an object, an ``id`` in
newer servers); the last line has ``done: true``, ``done_reason`` and the token counts
``prompt_eval_count`` and ``eval_count``. An error is ``{"error": "…"}``: the whole body
with an HTTP error status, or a line of the stream. Tool results go back as
``{"role": "tool", "content": …, "tool_name": …}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralph_agent.chat import (
    ChatClient,
    Line,
    Reply,
    StreamReader,
    ToolCallRequest,
    call_id,
    int_count,
    parse_arguments,
)
from pokeralph_agent.errors import WireError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pokeralph_agent.session import Message


class OllamaClient(ChatClient):
    api = "ollama"

    def url(self) -> str:
        return f"{self.base_url}/api/chat"

    def body(self, messages: Sequence[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        names: dict[str, str] = {}
        wire: list[dict[str, Any]] = []
        for message in messages:
            item: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "function": {
                            "name": call.tool_name,
                            "arguments": call.parameters
                            if isinstance(call.parameters, dict)
                            else {},
                        },
                    }
                    for call in message.tool_calls
                ]
                names.update({call.id: call.tool_name for call in message.tool_calls})
            if message.role == "tool":
                item["tool_name"] = names.get(message.tool_call_id or "", "")
            wire.append(item)
        return {"model": self.model, "messages": wire, "tools": tools, "stream": True}

    def reader(self, reply: Reply, on_text: Callable[[str], None]) -> StreamReader:
        return OllamaReader(reply, on_text)


class OllamaReader(StreamReader):
    """NDJSON: every non-blank line is a chunk; ``done: true`` ends it."""

    sender = "Ollama"
    unit = "a line"

    def data(self, line: bytes) -> bytes | Line:
        return line if line.strip() else Line.SKIP

    def take(self, chunk: dict[str, Any]) -> bool:
        reply = self.reply
        body = chunk.get("message")
        if isinstance(body, dict):
            self.text(body.get("content"))
            for call in body.get("tool_calls") or []:
                self._call(call)
        if chunk.get("done") is not True:
            return False
        reply.finish_reason = str(chunk.get("done_reason") or "stop")
        reply.input_tokens = int_count(chunk.get("prompt_eval_count"))
        reply.output_tokens = int_count(chunk.get("eval_count"))
        return True

    def end(self, over: bool) -> None:
        if not over:
            raise WireError("Ollama's stream ended without its final done line")

    def _call(self, call: Any) -> None:
        reply = self.reply
        if not self.room_for_call(len(reply.tool_calls)):
            return
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            reply.tool_calls.append(
                ToolCallRequest(
                    call_id(), "", None, f"a tool call without a function: {str(call)[:200]}"
                )
            )
            return
        given = call.get("id") if isinstance(call, dict) else None
        arguments, error = parse_arguments(function.get("arguments"))
        reply.tool_calls.append(
            ToolCallRequest(
                given if isinstance(given, str) and given else call_id(),
                str(function.get("name") or ""),
                arguments,
                error,
            )
        )
