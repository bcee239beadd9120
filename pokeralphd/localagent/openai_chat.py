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

from pokeralphd.localagent.chat import (
    MAX_ARGUMENTS,
    MAX_TOOL_CALLS,
    ChatClient,
    Reply,
    ToolCallRequest,
    call_id,
    error_message,
    int_count,
    parse_arguments,
)
from pokeralphd.localagent.errors import ApiStatusError, WireError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from pokeralphd.localagent.session import Message


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

    async def read(
        self, lines: AsyncIterator[bytes], reply: Reply, on_text: Callable[[str], None]
    ) -> None:
        calls: dict[int, dict[str, Any]] = {}
        finished = False
        async for raw in lines:
            line = raw.decode("utf-8", "replace")
            if not line.startswith("data:"):
                continue  # blank separators, ": comments", "event:" lines
            data = line[5:].strip()
            if data == "[DONE]":
                finished = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise WireError(
                    f"the server sent an event that is not JSON: {data[:200]!r}"
                ) from None
            if not isinstance(chunk, dict):
                raise WireError(f"the server sent an event that is not an object: {data[:200]!r}")
            message = error_message(chunk)
            if message is not None:
                raise ApiStatusError(None, message)
            reply.model = chunk.get("model") or reply.model
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                reply.input_tokens = int_count(usage.get("prompt_tokens"))
                reply.output_tokens = int_count(usage.get("completion_tokens"))
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                text = delta.get("content")
                if isinstance(text, str) and text:
                    kept = reply.add_text(text)
                    if kept:
                        on_text(kept)
                for piece in delta.get("tool_calls") or []:
                    self._piece(piece, calls, reply)
            if choice.get("finish_reason"):
                reply.finish_reason = str(choice["finish_reason"])
        if not finished and reply.finish_reason is None:
            raise WireError("the stream ended before a finish_reason or [DONE]")
        for index in sorted(calls):
            call = calls[index]
            arguments, error = parse_arguments(call["arguments"])
            if call["too_long"]:
                arguments, error = None, f"the arguments are longer than {MAX_ARGUMENTS // 1024} KB"
            reply.tool_calls.append(
                ToolCallRequest(call["id"] or call_id(), call["name"], arguments, error)
            )

    @staticmethod
    def _piece(piece: Any, calls: dict[int, dict[str, Any]], reply: Reply) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(calls))
        if not isinstance(index, int) or isinstance(index, bool):
            index = len(calls)
        if index not in calls:
            if len(calls) >= MAX_TOOL_CALLS:
                if not any("tool calls" in n for n in reply.notes):
                    reply.notes.append(
                        f"more than {MAX_TOOL_CALLS} tool calls in one reply; the rest were dropped"
                    )
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
