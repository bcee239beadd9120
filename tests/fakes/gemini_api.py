"""A scripted Gemini API (``generativelanguage.googleapis.com``'s REST surface) on
127.0.0.1, as Gemini CLI calls it with ``GOOGLE_GEMINI_BASE_URL``:

- ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``: the next turn of the
  script as server-sent events, each ``data: {GenerateContentResponse}`` and a blank
  line: the text in a few pieces, a function call as one part
  (``{"functionCall": {"name", "args"}}``), the last chunk with ``finishReason: STOP``
  and ``usageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
  ``totalTokenCount``).
- ``POST …:generateContent``: the CLI's side questions (which model routes a turn, who
  speaks next), answered as JSON text saying the user speaks next; they never consume a
  turn of the script.
- ``POST …:countTokens``: ``{"totalTokens": 10}``.

The script's turns are :class:`~tests.fakes.ollama_api.Text` and
:class:`~tests.fakes.ollama_api.Tools` (as the other fakes'); when it runs out, "Done.".
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.fakes.ollama_api import Call, Recorded, Text, Tools
from tests.fakes.scripted_http import ScriptedHandler, ScriptedHTTP

__all__ = ["Call", "GeminiAPI", "Text", "Tools"]
SIDE_ANSWER = {
    "reasoning": "the model finished its turn",
    "next_speaker": "user",
    "model_choice": "flash",
}


class GeminiAPI(ScriptedHTTP[Recorded]):
    record_type = Recorded

    def __init__(self, script: list[Text | Tools], *, prompt_tokens: int = 42) -> None:
        self.script = list(script)
        self.prompt_tokens = prompt_tokens
        self.turns_lock = threading.Lock()
        server = self

        class Handler(ScriptedHandler):
            def do_GET(self) -> None:
                self.record()
                self.send_json(404, {"error": {"code": 404, "message": "not found"}})

            def do_POST(self) -> None:
                rec = self.record()
                path = self.path.split("?")[0]
                if path.endswith(":countTokens"):
                    self.send_json(200, {"totalTokens": 10})
                elif path.endswith(":streamGenerateContent"):
                    chunks = [
                        b"data: " + json.dumps(c).encode() + b"\r\n\r\n"
                        for c in server.chunks(server.next_turn())
                    ]
                    self.send_chunked(chunks, "text/event-stream")
                elif path.endswith(":generateContent"):
                    self.send_json(200, server.side_answer(rec.body))
                else:
                    self.send_json(404, {"error": {"code": 404, "message": f"no {path}"}})

        super().__init__(Handler)

    def next_turn(self) -> Text | Tools:
        with self.turns_lock:
            return self.script.pop(0) if self.script else Text("Done.")

    def stream_requests(self) -> list[Recorded]:
        return [r for r in self.requests if ":streamGenerateContent" in r.path]

    def usage(self, output: int) -> dict[str, int]:
        return {
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": self.prompt_tokens + output,
        }

    def chunks(self, turn: Text | Tools) -> list[dict[str, Any]]:
        pieces: list[dict[str, Any]] = []
        text = turn.text
        for start in range(0, len(text), max(1, len(text) // 3 + 1)):
            pieces.append({"text": text[start : start + len(text) // 3 + 1]})
        if isinstance(turn, Tools):
            pieces += [{"functionCall": {"name": c.name, "args": c.arguments}} for c in turn.calls]
        out = [_response([p]) for p in pieces]
        last = _response([], finish="STOP")
        last["usageMetadata"] = self.usage(7)
        return [*out, last]

    def side_answer(self, body: Any) -> dict[str, Any]:
        response = _response([{"text": json.dumps(SIDE_ANSWER)}], finish="STOP")
        response["usageMetadata"] = self.usage(3)
        return response


def _response(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}
