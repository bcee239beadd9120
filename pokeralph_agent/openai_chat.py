"""The OpenAI-compatible chat completions API (LM Studio, llama.cpp's llama-server,
vLLM, Ollama's ``/v1``): ``POST {baseUrl}/chat/completions`` (``/v1`` is added to a base
URL that does not end in it) with ``stream: true`` and
``stream_options: {"include_usage": true}``.

The body is server-sent events: ``data: {chunk}`` lines, ``data: [DONE]`` at the end.
A chunk's ``choices[0].delta`` carries ``content`` pieces and ``tool_calls`` pieces keyed
by ``index``: the first piece of a call has its ``id`` and ``function.name``, later ones
add to ``function.arguments`` (a JSON string, complete only at the end);
``finish_reason`` ends the choice. With ``include_usage`` a last chunk with empty
``choices`` carries ``usage`` (``prompt_tokens``, ``completion_tokens``). An error is
``{"error": {"message": …}}``, as the body of an HTTP error or as a ``data:`` line.
Tool results go back as ``{"role": "tool", "tool_call_id": …, "content": …}``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralph_agent.chat import (
    ARGUMENTS_TOO_LONG,
    MAX_ARGUMENTS,
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


class OpenAIClient(ChatClient):
    api = "openai"

    def url(self) -> str:
        base = self.base_url if self.base_url.endswith("/v1") else f"{self.base_url}/v1"
        return f"{base}/chat/completions"

    def body(self, messages: Sequence[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        wire: list[dict[str, Any]] = []
        for message in messages:
            item: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.tool_calls:
                item["content"] = message.content or None
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.tool_name,
                            "arguments": json.dumps(
                                call.parameters if isinstance(call.parameters, dict) else {},
                                ensure_ascii=False,
                            ),
                        },
                    }
                    for call in message.tool_calls
                ]
            if message.role == "tool":
                item["tool_call_id"] = message.tool_call_id
            wire.append(item)
        return {
            "model": self.model,
            "messages": wire,
            "tools": tools,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def reader(self, reply: Reply, on_text: Callable[[str], None]) -> StreamReader:
        return OpenAIReader(reply, on_text)


class OpenAIReader(StreamReader):
    """Server-sent events: ``data:`` lines carry chunks, ``data: [DONE]`` ends them;
    tool calls come in pieces, joined at the end."""

    def __init__(self, reply: Reply, on_text: Callable[[str], None]) -> None:
        super().__init__(reply, on_text)
        self.calls: dict[int, dict[str, Any]] = {}

    def data(self, line: bytes) -> str | Line:
        text = line.decode("utf-8", "replace")
        if not text.startswith("data:"):
            return Line.SKIP  # blank separators, ": comments", "event:" lines
        data = text[5:].strip()
        return Line.END if data == "[DONE]" else data

    def take(self, chunk: dict[str, Any]) -> bool:
        reply = self.reply
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            reply.input_tokens = int_count(usage.get("prompt_tokens"))
            reply.output_tokens = int_count(usage.get("completion_tokens"))
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return False
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self.text(delta.get("content"))
            for piece in delta.get("tool_calls") or []:
                self._piece(piece)
        if choice.get("finish_reason"):
            reply.finish_reason = str(choice["finish_reason"])
        return False

    def end(self, over: bool) -> None:
        reply = self.reply
        if not over and reply.finish_reason is None:
            raise WireError("the stream ended before a finish_reason or [DONE]")
        for index in sorted(self.calls):
            call = self.calls[index]
            arguments, error = (
                (None, ARGUMENTS_TOO_LONG)
                if call["too_long"]
                else parse_arguments(call["arguments"])
            )
            reply.tool_calls.append(
                ToolCallRequest(call["id"] or call_id(), call["name"], arguments, error)
            )

    def _piece(self, piece: Any) -> None:
        calls = self.calls
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(calls))
        if not isinstance(index, int) or isinstance(index, bool):
            index = len(calls)
        if index not in calls:
            if not self.room_for_call(len(calls)):
                return
            calls[index] = {"id": "", "name": "", "arguments": "", "too_long": False}
        call = calls[index]
        if isinstance(piece.get("id"), str) and piece["id"]:
            call["id"] = piece["id"]
        function = piece.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and function["name"]:
                call["name"] = function["name"]
            more = function.get("arguments")
            if isinstance(more, str):
                if len(call["arguments"]) + len(more) > MAX_ARGUMENTS:
                    call["too_long"] = True
                else:
                    call["arguments"] += more
            elif isinstance(more, dict):  # some servers send the object whole
                call["arguments"] = json.dumps(more)
