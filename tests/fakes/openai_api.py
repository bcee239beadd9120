"""A scripted OpenAI-compatible server on 127.0.0.1 (as LM Studio, llama.cpp's
llama-server, vLLM and Ollama's ``/v1`` serve it): ``POST /v1/chat/completions``.

The same script as :mod:`tests.fakes.ollama_api` (:class:`Text`, :class:`Tools`,
:class:`ApiError`, :class:`Raw`). With ``"stream": true`` the body is server-sent events
(``text/event-stream``), each ``data: {chunk}`` followed by a blank line: a first chunk
with ``delta: {"role": "assistant", "content": ""}``; the text in a few ``content``
pieces; each tool call as pieces keyed by ``index``, the first with ``id``, ``type`` and
``function.name`` and empty ``arguments``, the next ones adding to
``function.arguments`` (a JSON string cut in the middle); a chunk with an empty delta
and ``finish_reason`` (``stop`` or ``tool_calls``); with
``stream_options.include_usage`` every chunk carries ``usage: null`` and a last chunk
with empty ``choices`` carries ``usage`` (``prompt_tokens``, ``completion_tokens``,
``total_tokens``); then ``data: [DONE]``. Without streaming the reply is one
``chat.completion`` object. An error is ``{"error": {"message", "type", "param", "code"}}``
with its status. ``GET /v1/models`` lists the model. A required ``api_key`` makes
requests without ``Authorization: Bearer <key>`` a 401.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.ollama_api import (
    MODEL,
    ApiError,
    Call,
    Raw,
    Recorded,
    ScriptServer,
    Text,
    Tools,
    Turn,
)

__all__ = ["MODEL", "ApiError", "Call", "OpenAIAPI", "Raw", "Recorded", "Text", "Tools", "Turn"]


class OpenAIAPI(ScriptServer):
    chat_path = "/v1/chat/completions"

    def __init__(self, script: list[Turn], *, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.api_key = api_key
        self._n = 0

    def next_turn(self) -> Turn:
        if self.api_key is not None:
            recorded = self.chat_requests()
            if recorded and recorded[-1].headers.get("authorization") != f"Bearer {self.api_key}":
                return ApiError(401, "Incorrect API key provided")
        return super().next_turn()

    def get(self, path: str) -> tuple[int, bytes, str]:
        if path == "/v1/models":
            data = {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 1, "owned_by": "me"}],
            }
            return 200, json.dumps(data).encode(), "application/json"
        return self.not_found()

    def not_found(self) -> tuple[int, bytes, str]:
        body = {
            "error": {
                "message": "Not found",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
        return 404, json.dumps(body).encode(), "application/json"

    def error(self, turn: ApiError) -> tuple[int, bytes, str]:
        kind = "server_error" if turn.status >= 500 else "invalid_request_error"
        body = {"error": {"message": turn.message, "type": kind, "param": None, "code": None}}
        return turn.status, json.dumps(body).encode(), "application/json"

    def _chunk(
        self, model: str, choices: list[dict[str, Any]], null_usage: bool, **extra: Any
    ) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-{self._n}",
            "object": "chat.completion.chunk",
            "created": 1795000000,
            "model": model,
            "system_fingerprint": "fp_local",
            "choices": choices,
        }
        if null_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    @staticmethod
    def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def chunks(self, turn: Text | Tools, body: dict[str, Any]) -> tuple[list[bytes], str]:
        self._n += 1
        model = str(body.get("model") or MODEL)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        out = [self._chunk(model, [self._choice({"role": "assistant", "content": ""})], usage)]
        text = turn.text
        step = max(1, len(text) // 3 + 1)
        for i in range(0, len(text), step):
            out.append(self._chunk(model, [self._choice({"content": text[i : i + step]})], usage))
        if isinstance(turn, Tools):
            for index, call in enumerate(turn.calls):
                raw = (
                    call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments)
                )
                first = {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                out.append(self._chunk(model, [self._choice({"tool_calls": [first]})], usage))
                half = len(raw) // 2
                for part in (raw[:half], raw[half:]):
                    piece = {"index": index, "function": {"arguments": part}}
                    out.append(self._chunk(model, [self._choice({"tool_calls": [piece]})], usage))
        finish = "tool_calls" if isinstance(turn, Tools) else "stop"
        out.append(self._chunk(model, [self._choice({}, finish)], usage))
        if usage:
            out.append(
                self._chunk(
                    model,
                    [],
                    False,
                    usage={
                        "prompt_tokens": self.prompt_tokens,
                        "completion_tokens": self.completion_tokens,
                        "total_tokens": self.prompt_tokens + self.completion_tokens,
                    },
                )
            )
        lines = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in out]
        lines.append(b"data: [DONE]\n\n")
        return lines, "text/event-stream; charset=utf-8"

    def whole(self, turn: Text | Tools, body: dict[str, Any]) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if isinstance(turn, Tools):
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.raw_arguments
                        if call.raw_arguments is not None
                        else json.dumps(call.arguments),
                    },
                }
                for call in turn.calls
            ]
        reply = {
            "id": "chatcmpl-whole",
            "object": "chat.completion",
            "created": 1795000000,
            "model": str(body.get("model") or MODEL),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if isinstance(turn, Tools) else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            },
        }
        return json.dumps(reply).encode()
