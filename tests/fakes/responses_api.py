"""A scripted OpenAI Responses API on 127.0.0.1, for running the real Codex CLI.

    with ResponsesAPI([Call("exec_command", {"cmd": "touch x"}), Say("done")]) as api:
        config_toml = provider_toml(api)  # a CODEX_HOME/config.toml model provider

``POST /v1/responses`` takes the next turn of the script and answers it in the real wire
format: with ``"stream": true`` as server-sent events (``response.created``,
``response.in_progress``; per output item ``response.output_item.added``, then for a
message ``response.content_part.added``, ``response.output_text.delta``/``.done``,
``response.content_part.done``, for a function call
``response.function_call_arguments.delta``/``.done``; ``response.output_item.done``;
finally ``response.completed`` with ``usage`` incl. ``input_tokens_details.cached_tokens``
and ``output_tokens_details.reasoning_tokens``), otherwise as one ``response`` object.

An :class:`ApiError` turn answers with OpenAI's error body
(``{"error":{"message","type","param","code"}}``), its status and an ``x-request-id``
header; ``sticky=True`` keeps answering it, so the CLI's own retries see it too. A
:class:`Failed` turn streams ``response.created`` then ``response.failed`` (an error inside
a 200 stream, as OpenAI reports e.g. a rate limit mid-response). Once the script is spent
every request gets ``Say(default_text)``.

Anything else is a 404 with OpenAI's ``invalid_request_error`` body. Every request is
recorded in :attr:`ResponsesAPI.requests` (method, path, headers, parsed JSON body), so a
test can read the ``function_call_output`` items the CLI sent back and the tools it offered.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import scripted_http
from tests.fakes.scripted_http import ScriptedHandler, ScriptedHTTP

MODEL = "gpt-5.1-codex"


@dataclass(frozen=True)
class Usage:
    """A response's usage, OpenAI's way: ``input`` includes ``cached``; ``output``
    includes ``reasoning``."""

    input: int = 1200
    cached: int = 1000
    output: int = 40
    reasoning: int = 16

    def json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.input + self.output,
        }


@dataclass(frozen=True)
class Say:
    """A turn that ends with one assistant message (``output_text``)."""

    text: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class Call:
    """A turn asking for one function call (optionally after some text).

    ``arguments`` is sent as the JSON string OpenAI sends; a str is sent as is."""

    name: str
    arguments: dict[str, Any] | str
    text: str | None = None
    call_id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:24])
    usage: Usage = field(default_factory=Usage)

    @property
    def raw_arguments(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


@dataclass(frozen=True)
class ApiError:
    """An HTTP error with OpenAI's error body, e.g.
    ``ApiError(429, "requests", "rate_limit_exceeded", "Rate limit reached …")``."""

    status: int
    type: str
    code: str | None = None
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    sticky: bool = False


@dataclass(frozen=True)
class Failed:
    """A 200 stream that ends in ``response.failed`` with ``error`` {code, message}."""

    code: str
    message: str
    sticky: bool = False


Turn = Say | Call | ApiError | Failed

RATE_LIMITED = ApiError(
    429,
    "requests",
    "rate_limit_exceeded",
    "Rate limit reached for gpt-5.1-codex in organization org-test on requests per min "
    "(RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
    {"retry-after": "20", "x-ratelimit-reset-requests": "20s"},
    sticky=True,
)
SERVER_ERROR = ApiError(
    500,
    "server_error",
    None,
    "The server had an error while processing your request. Sorry about that!",
    sticky=True,
)


class Recorded(scripted_http.Recorded):
    def inputs(self, kind: str) -> list[dict[str, Any]]:
        """The request's ``input`` items of one ``type`` (e.g. ``function_call_output``)."""
        if not isinstance(self.body, dict):
            return []
        items = self.body.get("input") or []
        return [i for i in items if isinstance(i, dict) and i.get("type") == kind]

    def tool_names(self) -> list[str]:
        if not isinstance(self.body, dict):
            return []
        return [
            str(t.get("name") or t.get("type"))
            for t in self.body.get("tools") or []
            if isinstance(t, dict)
        ]


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class ResponsesAPI(ScriptedHTTP[Recorded]):
    record_type = Recorded

    def __init__(self, script: list[Turn], *, default_text: str = "Done.") -> None:
        self.script = list(script)
        self.default_text = default_text
        self._ids = itertools.count(1)
        self._sticky: ApiError | Failed | None = None
        api = self

        class Handler(ScriptedHandler):
            def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                extra = [("x-request-id", api.request_id()), *(headers or {}).items()]
                self.send_json(status, obj, extra)

            def _not_found(self) -> None:
                path = self.path.split("?")[0]
                self._json(
                    404,
                    {
                        "error": {
                            "message": f"Invalid URL ({self.command} {path})",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )

            def do_HEAD(self) -> None:
                self.record()
                self._not_found()

            def do_GET(self) -> None:
                self.record()
                self._not_found()

            def do_POST(self) -> None:
                rec = self.record()
                if self.path.split("?")[0] != "/v1/responses" or not isinstance(rec.body, dict):
                    self._not_found()
                    return
                turn = api.next_turn()
                if isinstance(turn, ApiError):
                    error = {
                        "message": turn.message,
                        "type": turn.type,
                        "param": None,
                        "code": turn.code,
                    }
                    self._json(turn.status, {"error": error}, turn.headers)
                    return
                model = str(rec.body.get("model") or MODEL)
                events = api.sse_events(turn, model)
                if not rec.body.get("stream"):
                    last = json.loads(events[-1].split(b"data: ", 1)[1])
                    self._json(200, last["response"])
                    return
                headers = [("cache-control", "no-cache"), ("x-request-id", api.request_id())]
                self.send_until_close(events, "text/event-stream; charset=utf-8", headers)

        super().__init__(Handler)

    @property
    def url(self) -> str:
        """The base URL a provider's ``base_url`` names (Codex appends ``/responses``)."""
        return super().url + "/v1"

    def request_id(self) -> str:
        return f"req_{next(self._ids):032x}"

    def next_turn(self) -> Turn:
        with self._lock:
            if self._sticky is not None:
                return self._sticky
            if not self.script:
                return Say(self.default_text)
            turn = self.script.pop(0)
            if isinstance(turn, ApiError | Failed) and turn.sticky:
                self._sticky = turn
            return turn

    def release(self) -> None:
        """Stop answering a sticky error: the next request takes the next turn."""
        with self._lock:
            self._sticky = None

    def response_requests(self) -> list[Recorded]:
        """The CLI's ``POST /v1/responses`` requests."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST" and r.path.split("?")[0] == "/v1/responses"
            ]

    def function_outputs(self) -> list[dict[str, Any]]:
        """Every ``function_call_output`` the CLI sent back, in order, without repeats."""
        seen: set[str] = set()
        out: list[dict[str, Any]] = []
        for rec in self.response_requests():
            for item in rec.inputs("function_call_output"):
                key = str(item.get("call_id"))
                if key not in seen:
                    seen.add(key)
                    out.append(item)
        return out

    def sse_events(self, turn: Say | Call | Failed, model: str) -> list[bytes]:
        """The stream for one turn, each event with its ``sequence_number``."""
        rid = "resp_" + uuid.uuid4().hex
        seq = itertools.count()
        base: dict[str, Any] = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "parallel_tool_calls": False,
            "usage": None,
        }
        out: list[dict[str, Any]] = [
            {"type": "response.created", "response": base},
            {"type": "response.in_progress", "response": base},
        ]
        if isinstance(turn, Failed):
            error = {"code": turn.code, "message": turn.message}
            out.append(
                {"type": "response.failed", "response": dict(base, status="failed", error=error)}
            )
            return [_sse(dict(e, sequence_number=next(seq))) for e in out]
        items: list[dict[str, Any]] = []
        text = turn.text
        if text:
            index = len(items)
            mid = "msg_" + uuid.uuid4().hex
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            done_part = dict(part, text=text)
            item = {
                "id": mid,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [done_part],
            }
            ref = {"item_id": mid, "output_index": index, "content_index": 0}
            out.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": dict(item, status="in_progress", content=[]),
                }
            )
            out.append({"type": "response.content_part.added", **ref, "part": part})
            half = len(text) // 2
            for delta in (text[:half], text[half:]):
                if delta:
                    out.append(
                        {
                            "type": "response.output_text.delta",
                            **ref,
                            "delta": delta,
                            "logprobs": [],
                        }
                    )
            out.append({"type": "response.output_text.done", **ref, "text": text, "logprobs": []})
            out.append({"type": "response.content_part.done", **ref, "part": done_part})
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
            items.append(item)
        if isinstance(turn, Call):
            index = len(items)
            fid = "fc_" + uuid.uuid4().hex
            args = turn.raw_arguments
            item = {
                "id": fid,
                "type": "function_call",
                "status": "completed",
                "arguments": args,
                "call_id": turn.call_id,
                "name": turn.name,
            }
            out.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": dict(item, status="in_progress", arguments=""),
                }
            )
            half = len(args) // 2
            for delta in (args[:half], args[half:]):
                if delta:
                    out.append(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": fid,
                            "output_index": index,
                            "delta": delta,
                        }
                    )
            out.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": fid,
                    "output_index": index,
                    "arguments": args,
                }
            )
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
            items.append(item)
        done = dict(base, status="completed", output=items, usage=turn.usage.json())
        out.append({"type": "response.completed", "response": done})
        return [_sse(dict(e, sequence_number=next(seq))) for e in out]


def provider_toml(api: ResponsesAPI, *, retries: int = 0, model: str = MODEL) -> str:
    """A ``CODEX_HOME/config.toml`` whose only model provider is ``api``: the key comes
    from ``$OPENAI_API_KEY`` (``env_key``), and the CLI's own retries are bounded by
    ``retries`` (``request_max_retries`` for HTTP errors, ``stream_max_retries`` for a
    failed stream) so a test sees the error at once."""
    return (
        f'model = "{model}"\n'
        'model_provider = "scripted"\n'
        "\n"
        "[model_providers.scripted]\n"
        'name = "Scripted Responses API"\n'
        f'base_url = "{api.url}"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        f"request_max_retries = {retries}\n"
        f"stream_max_retries = {retries}\n"
    )
