"""A scripted Ollama server on 127.0.0.1, speaking ``POST /api/chat`` as Ollama does.

    with OllamaAPI([Tools([Call("create_file", {"path": "a.py", "content": "…"})]),
                    Text("Done.")]) as api:
        ...  # point the agent at api.url

Each ``POST /api/chat`` takes the next turn of the script. With ``"stream": true`` (the
default, as in Ollama) the body is NDJSON (``application/x-ndjson``): the text in a few
``message.content`` pieces with ``done: false``; tool calls in one chunk's
``message.tool_calls`` (``{"id", "function": {"index", "name", "arguments": {…}}}``,
arguments an object); then a last chunk with empty content, ``done: true``,
``done_reason: "stop"``, the durations and ``prompt_eval_count``/``eval_count``. With
``"stream": false`` the same reply is one object. An :class:`ApiError` turn answers with
Ollama's error body ``{"error": "…"}`` and its status; :class:`Raw` sends the lines given
(broken output); once the script is spent, ``repeat_last`` repeats its last turn (a model
in a loop), else every request gets ``Text(default_text)``.

``GET /api/tags`` lists the model, ``GET /`` says "Ollama is running", anything else is
a 404 ``{"error": "404 page not found"}``. Every request is recorded (:attr:`requests`).

The script and its request handling here are used by :mod:`tests.fakes.openai_api` too;
the server and the recording come from :mod:`tests.fakes.scripted_http`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import scripted_http
from tests.fakes.scripted_http import ScriptedHandler, ScriptedHTTP

MODEL = "qwen2.5-coder:7b"


@dataclass(frozen=True)
class Text:
    """A reply with text only: the model is done."""

    text: str


@dataclass(frozen=True)
class Call:
    """One tool call; ``raw_arguments`` sends that text as the arguments instead (broken
    JSON, a wrong type), where the wire format allows it."""

    name: str
    arguments: Any = field(default_factory=dict)
    raw_arguments: str | None = None
    id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:8])


@dataclass(frozen=True)
class Tools:
    """A reply asking for tool calls (optionally after some text)."""

    calls: list[Call]
    text: str = ""


@dataclass(frozen=True)
class ApiError:
    status: int
    message: str = "error"
    sticky: bool = False


@dataclass(frozen=True)
class Raw:
    """A 200 reply whose body is exactly these lines (each sent with a newline)."""

    lines: list[bytes]
    content_type: str = "application/x-ndjson"


Turn = Text | Tools | ApiError | Raw


class Recorded(scripted_http.Recorded):
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []

    def tool_messages(self) -> list[dict[str, Any]]:
        """The ``role: tool`` messages of this request."""
        return [m for m in self.messages() if m.get("role") == "tool"]


class ScriptServer(ScriptedHTTP[Recorded]):
    """A threaded HTTP server on 127.0.0.1 answering from a script of turns."""

    chat_path = "/api/chat"
    record_type = Recorded
    poll_interval = 0.05

    def __init__(
        self,
        script: list[Turn],
        *,
        default_text: str = "Done.",
        repeat_last: bool = False,
        prompt_tokens: int = 42,
        completion_tokens: int = 7,
    ) -> None:
        self.script = list(script)
        self.default_text = default_text
        self.repeat_last = repeat_last
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self._last: Turn | None = None
        self._sticky: ApiError | None = None
        server = self

        class Handler(ScriptedHandler):
            def do_GET(self) -> None:
                self.record()
                status, data, kind = server.get(self.path.split("?")[0])
                self.send_body(status, data, kind)

            def do_POST(self) -> None:
                rec = self.record()
                if self.path.split("?")[0] != server.chat_path or not isinstance(rec.body, dict):
                    status, data, kind = server.not_found()
                    self.send_body(status, data, kind)
                    return
                turn = server.next_turn()
                if isinstance(turn, ApiError):
                    status, data, kind = server.error(turn)
                    self.send_body(status, data, kind)
                elif isinstance(turn, Raw):
                    self.send_chunked([line + b"\n" for line in turn.lines], turn.content_type)
                elif rec.body.get("stream", True) is False:
                    self.send_body(200, server.whole(turn, rec.body), "application/json")
                else:
                    chunks, kind = server.chunks(turn, rec.body)
                    self.send_chunked(chunks, kind)

        super().__init__(Handler)

    def next_turn(self) -> Turn:
        with self._lock:
            if self._sticky is not None:
                return self._sticky
            if self.script:
                turn = self.script.pop(0)
                self._last = turn
                if isinstance(turn, ApiError) and turn.sticky:
                    self._sticky = turn
                return turn
            if self.repeat_last and self._last is not None:
                return self._last
            return Text(self.default_text)

    def chat_requests(self) -> list[Recorded]:
        with self._lock:
            return [
                r for r in self.requests if r.method == "POST" and r.path.startswith(self.chat_path)
            ]

    def tool_messages(self) -> list[dict[str, Any]]:
        """The tool results the agent sent back, in order, each once."""
        seen: list[dict[str, Any]] = []
        for rec in self.chat_requests():
            for message in rec.tool_messages():
                if message not in seen:
                    seen.append(message)
        return seen

    # -- the wire format (Ollama's here; the OpenAI fake overrides these)
    def get(self, path: str) -> tuple[int, bytes, str]:
        if path == "/":
            return 200, b"Ollama is running", "text/plain; charset=utf-8"
        if path == "/api/tags":
            model = {"name": MODEL, "model": MODEL, "size": 4683087332, "digest": "a" * 64}
            return 200, json.dumps({"models": [model]}).encode(), "application/json; charset=utf-8"
        return self.not_found()

    def not_found(self) -> tuple[int, bytes, str]:
        return 404, b"404 page not found", "text/plain"

    def error(self, turn: ApiError) -> tuple[int, bytes, str]:
        return (
            turn.status,
            json.dumps({"error": turn.message}).encode(),
            "application/json; charset=utf-8",
        )

    @staticmethod
    def _now() -> str:
        return "2026-11-23T10:00:00.000000Z"

    def _final(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "created_at": self._now(),
            "message": {"role": "assistant", "content": ""},
            "done_reason": "stop",
            "done": True,
            "total_duration": 1234567,
            "load_duration": 12345,
            "prompt_eval_count": self.prompt_tokens,
            "prompt_eval_duration": 23456,
            "eval_count": self.completion_tokens,
            "eval_duration": 34567,
        }

    @staticmethod
    def _ollama_calls(turn: Tools) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id,
                "function": {
                    "index": index,
                    "name": call.name,
                    "arguments": call.arguments
                    if call.raw_arguments is None
                    else call.raw_arguments,
                },
            }
            for index, call in enumerate(turn.calls)
        ]

    def chunks(self, turn: Text | Tools, body: dict[str, Any]) -> tuple[list[bytes], str]:
        model = str(body.get("model") or MODEL)
        text = turn.text
        pieces = [
            text[i : i + max(1, len(text) // 3 + 1)]
            for i in range(0, len(text), max(1, len(text) // 3 + 1))
        ]
        out: list[dict[str, Any]] = [
            {
                "model": model,
                "created_at": self._now(),
                "message": {"role": "assistant", "content": piece},
                "done": False,
            }
            for piece in pieces
        ]
        if isinstance(turn, Tools):
            out.append(
                {
                    "model": model,
                    "created_at": self._now(),
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": self._ollama_calls(turn),
                    },
                    "done": False,
                }
            )
        out.append(self._final(model))
        return [json.dumps(c).encode() + b"\n" for c in out], "application/x-ndjson"

    def whole(self, turn: Text | Tools, body: dict[str, Any]) -> bytes:
        final = self._final(str(body.get("model") or MODEL))
        final["message"] = {"role": "assistant", "content": turn.text}
        if isinstance(turn, Tools):
            final["message"]["tool_calls"] = self._ollama_calls(turn)
        return json.dumps(final).encode()


class OllamaAPI(ScriptServer):
    """Ollama's native API (see the module docstring)."""
