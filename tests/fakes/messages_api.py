"""A scripted Anthropic Messages API on 127.0.0.1, for running the real Claude Code CLI.

    with MessagesAPI([ToolUse("Bash", {"command": "touch x"}), Text("done")]) as api:
        env = {"ANTHROPIC_BASE_URL": api.url, ...}

``POST /v1/messages`` takes the next turn of the script and answers it in the real wire
format: with ``"stream": true`` as server-sent events (``message_start``,
``content_block_start``/``content_block_delta``/``content_block_stop`` per block,
``message_delta`` with ``stop_reason`` and ``usage``, ``message_stop``), otherwise as one
``message`` JSON object. An :class:`ApiError` turn answers with the real error body
(``{"type":"error","error":{"type":…,"message":…},"request_id":…}``) and a ``request-id``
header; ``sticky=True`` keeps answering it, so the CLI's own retries see it too. Once the
script is spent every request gets ``Text(default_text)``.

Requests whose body offers no tools (the CLI's side queries: titles, summaries) get the
default text without consuming a turn, unless ``side_queries_consume=True``.

``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}``; ``GET /v1/models``
lists one model; anything else is a 404 with the real ``not_found_error`` body. Every
request is recorded in :attr:`MessagesAPI.requests` (method, path, headers, parsed JSON
body), so a test can read the ``tool_result`` blocks the CLI sent back.
"""

from __future__ import annotations

import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import scripted_http
from tests.fakes.scripted_http import ScriptedHandler, ScriptedHTTP

MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True)
class Text:
    """An assistant turn with one text block; ``stop_reason`` ``end_turn``."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """An assistant turn asking for one tool (optionally after some text); ``tool_use``."""

    name: str
    input: dict[str, Any]
    text: str | None = None
    id: str = field(default_factory=lambda: "toolu_01" + uuid.uuid4().hex[:22])


@dataclass(frozen=True)
class ApiError:
    """An HTTP error with the API's error body, e.g. ``ApiError(429, "rate_limit_error")``."""

    status: int
    type: str
    message: str = "Error"
    headers: dict[str, str] = field(default_factory=dict)
    sticky: bool = False


Turn = Text | ToolUse | ApiError


class Recorded(scripted_http.Recorded):
    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks in this request's last user message."""
        if not isinstance(self.body, dict):
            return []
        messages = self.body.get("messages") or []
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def result_text(block: dict[str, Any]) -> str:
    """The text of a ``tool_result`` block (a string, or a list of text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(c.get("text", ""))
            for c in content
            if isinstance(c, dict) and c.get("type") == "text"
        )
    return ""


class MessagesAPI(ScriptedHTTP[Recorded]):
    record_type = Recorded

    def __init__(
        self,
        script: list[Turn],
        *,
        default_text: str = "Done.",
        side_queries_consume: bool = False,
    ) -> None:
        self.script = list(script)
        self.default_text = default_text
        self.side_queries_consume = side_queries_consume
        self._ids = itertools.count(1)
        self._sticky: ApiError | None = None
        api = self

        class Handler(ScriptedHandler):
            def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                extra = [("request-id", api.request_id()), *(headers or {}).items()]
                self.send_json(status, obj, extra)

            def _not_found(self) -> None:
                self._json(
                    404,
                    {
                        "type": "error",
                        "error": {"type": "not_found_error", "message": f"Not found: {self.path}"},
                        "request_id": api.request_id(),
                    },
                )

            def do_HEAD(self) -> None:
                self.record()
                self._not_found()

            def do_GET(self) -> None:
                self.record()
                if self.path.split("?")[0] == "/v1/models":
                    model = {
                        "type": "model",
                        "id": MODEL,
                        "display_name": "Claude Sonnet 4.5",
                        "created_at": "2025-09-29T00:00:00Z",
                    }
                    self._json(
                        200,
                        {"data": [model], "has_more": False, "first_id": MODEL, "last_id": MODEL},
                    )
                else:
                    self._not_found()

            def do_POST(self) -> None:
                rec = self.record()
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    size = len(json.dumps(rec.body)) if rec.body is not None else 0
                    self._json(200, {"input_tokens": max(1, size // 4)})
                    return
                if path != "/v1/messages" or not isinstance(rec.body, dict):
                    self._not_found()
                    return
                turn = api.next_turn(rec.body)
                if isinstance(turn, ApiError):
                    self._json(
                        turn.status,
                        {
                            "type": "error",
                            "error": {"type": turn.type, "message": turn.message},
                            "request_id": api.request_id(),
                        },
                        turn.headers,
                    )
                    return
                model = str(rec.body.get("model") or MODEL)
                if rec.body.get("stream"):
                    self._stream(turn, model)
                else:
                    self._json(200, api.message_json(turn, model))

            def _stream(self, turn: Text | ToolUse, model: str) -> None:
                headers = [("cache-control", "no-cache"), ("request-id", api.request_id())]
                events = api.sse_events(turn, model)
                self.send_until_close(events, "text/event-stream; charset=utf-8", headers)

        super().__init__(Handler)

    def request_id(self) -> str:
        return f"req_{next(self._ids):024d}"

    def next_turn(self, body: dict[str, Any]) -> Turn:
        with self._lock:
            if self._sticky is not None:
                return self._sticky
            side = not body.get("tools") and not self.side_queries_consume
            if side or not self.script:
                return Text(self.default_text)
            turn = self.script.pop(0)
            if isinstance(turn, ApiError) and turn.sticky:
                self._sticky = turn
            return turn

    def message_requests(self) -> list[Recorded]:
        """The agent's own ``POST /v1/messages`` requests (those that offer tools)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST"
                and r.path.split("?")[0] == "/v1/messages"
                and isinstance(r.body, dict)
                and r.body.get("tools")
            ]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block the CLI sent back, in order, without repeats."""
        seen: set[str] = set()
        out: list[dict[str, Any]] = []
        for rec in self.message_requests():
            for block in rec.tool_results():
                key = str(block.get("tool_use_id"))
                if key not in seen:
                    seen.add(key)
                    out.append(block)
        return out

    @staticmethod
    def _usage(output_tokens: int) -> dict[str, int]:
        return {
            "input_tokens": 25,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
        }

    def message_json(self, turn: Text | ToolUse, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if isinstance(turn, Text):
            content.append({"type": "text", "text": turn.text})
        else:
            if turn.text:
                content.append({"type": "text", "text": turn.text})
            content.append(
                {"type": "tool_use", "id": turn.id, "name": turn.name, "input": turn.input}
            )
        return {
            "id": "msg_01" + uuid.uuid4().hex[:22],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "end_turn" if isinstance(turn, Text) else "tool_use",
            "stop_sequence": None,
            "usage": self._usage(10),
        }

    def sse_events(self, turn: Text | ToolUse, model: str) -> list[bytes]:
        message = self.message_json(turn, model)
        start = dict(message, content=[], stop_reason=None, usage=self._usage(1))
        out = [_sse("message_start", {"type": "message_start", "message": start})]
        out.append(_sse("ping", {"type": "ping"}))
        for index, block in enumerate(message["content"]):
            first: dict[str, Any]
            if block["type"] == "text":
                first = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": block["text"]}]
            else:
                first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                raw = json.dumps(block["input"])
                half = len(raw) // 2
                deltas = [
                    {"type": "input_json_delta", "partial_json": ""},
                    {"type": "input_json_delta", "partial_json": raw[:half]},
                    {"type": "input_json_delta", "partial_json": raw[half:]},
                ]
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": first},
                )
            )
            for delta in deltas:
                out.append(
                    _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                )
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out
