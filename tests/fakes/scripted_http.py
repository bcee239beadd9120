"""The HTTP scaffolding the scripted API fakes share; the wire formats stay in each fake.

:class:`ScriptedHTTP` runs a :class:`~http.server.ThreadingHTTPServer` on 127.0.0.1 in a
daemon thread (``start``/``close``, or ``with``) and keeps every request as a
:class:`Recorded` (method, path, lower-cased headers, parsed JSON body) under a lock the
fake also guards its script with. Its handler base, :class:`ScriptedHandler`, records a
request and writes a whole body or a stream of chunks with the right framing headers; the
bytes, the content types and any further headers are the fake's own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar, cast

Headers = Iterable[tuple[str, str]]


@dataclass
class Recorded:
    """One request as the fake received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


R = TypeVar("R", bound=Recorded)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: ScriptedHTTP[Any], handler: type[ScriptedHandler]) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), handler)


class ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def record(self) -> Recorded:
        """Read this request's body and keep the request in the fake's ``requests``."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = cast(_Server, self.server).fake
        rec: Recorded = fake.remember(self.command, self.path, headers, body)
        return rec

    def send_body(self, status: int, data: bytes, content_type: str, headers: Headers = ()) -> None:
        """One whole body with its ``content-length`` (no body bytes for ``HEAD``)."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, status: int, obj: Any, headers: Headers = ()) -> None:
        self.send_body(status, json.dumps(obj).encode(), "application/json", headers)

    def send_until_close(
        self, chunks: Iterable[bytes], content_type: str, headers: Headers
    ) -> None:
        """A 200 whose body ends when the connection closes, each chunk flushed as sent."""
        self.send_response(200)
        self.send_header("content-type", content_type)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def send_chunked(self, chunks: Iterable[bytes], content_type: str) -> None:
        """A 200 in ``transfer-encoding: chunked``, one HTTP chunk per item, flushed."""
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ScriptedHTTP(Generic[R]):
    """A fake's server and its record of requests; subclasses say which :class:`Recorded`
    they keep (``record_type``) and pass their handler class to ``__init__``."""

    record_type: type[R]
    poll_interval = 0.05  # how soon close() returns (serve_forever checks this often)

    def __init__(self, handler: type[ScriptedHandler]) -> None:
        self.requests: list[R] = []
        self._lock = threading.Lock()
        self._server = _Server(self, handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": self.poll_interval},
            daemon=True,
        )

    def remember(self, method: str, path: str, headers: dict[str, str], body: Any) -> R:
        rec = self.record_type(method, path, headers, body)
        with self._lock:
            self.requests.append(rec)
        return rec

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
