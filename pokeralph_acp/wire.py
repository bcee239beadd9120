"""JSON-RPC 2.0 over our stdin and stdout, as ACP frames it: one JSON object per line.

:class:`Peer` owns both streams. One thread (the caller of :meth:`Peer.serve`) reads
stdin; whoever sends writes under one lock, so frames never interleave. Requests and
notifications from the editor go to a handler; replies to the requests *we* send (ACP's
``session/request_permission`` asks the editor) wake the thread waiting on them.

Bounds: a line longer than :data:`MAX_LINE` is skipped up to its newline and answered
with ``-32600`` (id null, since the id cannot be read); at most :data:`MAX_PENDING` of our
own requests wait at once (another one fails at once). Malformed input of any kind gets
a JSON-RPC error, never ends the process; only the end of stdin does.
"""

from __future__ import annotations

import json
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO

#: The longest line read from the editor (a prompt with embedded files can be large).
MAX_LINE = 8 << 20
#: How many of our requests to the editor may wait for an answer at once.
MAX_PENDING = 64

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """Raised by a handler to answer its request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)


class PeerClosed(Exception):
    """Raised when a request to the editor cannot be answered: stdin ended or it was
    withdrawn (:meth:`Peer.withdraw`)."""


class _Waiter:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: dict[str, Any] | None = None


class Peer:
    """The editor at the other end of stdin/stdout.

    ``on_message(method, params, id)`` is called on the reading thread for every request
    (``id`` not None) and notification (``id`` None); it must return quickly, answering
    with :meth:`reply` / :meth:`fail` now or from another thread later.
    """

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self._in = stdin
        self._out = stdout
        self._lock = threading.Lock()
        self._pending: dict[int, _Waiter] = {}
        self._next_id = 0
        self.closed = threading.Event()

    # -- writing
    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.closed.set()  # the editor is gone; the reader ends too

    def reply(self, rid: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def fail(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": rid, "error": error})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(
        self, method: str, params: dict[str, Any], cancelled: threading.Event | None = None
    ) -> Any:
        """Send a request to the editor and wait for its result (on this thread).

        Raises :class:`RpcError` for an error answer, :class:`PeerClosed` when stdin ends
        or ``cancelled`` is set first (the turn was cancelled: the editor answers its own
        pending requests then, but we do not wait for it)."""
        waiter = _Waiter()
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                raise RpcError(INTERNAL_ERROR, f"more than {MAX_PENDING} requests wait on you")
            self._next_id += 1
            rid = self._next_id
            self._pending[rid] = waiter
        try:
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            while not waiter.done.wait(0.5):
                if self.closed.is_set() or (cancelled is not None and cancelled.is_set()):
                    raise PeerClosed(method)
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if waiter.error is not None:
            raise RpcError(
                int(waiter.error.get("code", INTERNAL_ERROR)),
                str(waiter.error.get("message", "")),
                waiter.error.get("data"),
            )
        return waiter.result

    # -- reading
    def serve(self, on_message: Callable[[str, Any, Any], None]) -> None:
        """Read stdin until it ends, dispatching every message."""
        try:
            while True:
                line = self._in.readline(MAX_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    self._skip_line()
                    self.fail(None, INVALID_REQUEST, f"message longer than {MAX_LINE} bytes")
                    continue
                if line.strip():
                    self._dispatch(line, on_message)
        finally:
            self.closed.set()

    def _skip_line(self) -> None:
        while True:
            chunk = self._in.readline(MAX_LINE)
            if not chunk or chunk.endswith(b"\n"):
                return

    def _dispatch(self, line: bytes, on_message: Callable[[str, Any, Any], None]) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            self.fail(None, PARSE_ERROR, f"not JSON: {exc}")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.fail(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message object")
            return
        rid = message.get("id")
        if "id" in message and not (rid is None or type(rid) in (int, str)):
            self.fail(None, INVALID_REQUEST, "id must be a string, a number or null")
            return
        method = message.get("method")
        if method is None and "id" in message and ("result" in message or "error" in message):
            self._answered(rid, message)
            return
        if not isinstance(method, str):
            self.fail(rid, INVALID_REQUEST, "method must be a string")
            return
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            self.fail(rid, INVALID_PARAMS, "params must be an object", {"field": "params"})
            return
        on_message(method, params, rid if "id" in message else None)

    def _answered(self, rid: Any, message: dict[str, Any]) -> None:
        with self._lock:
            waiter = self._pending.get(rid) if type(rid) is int else None
        if waiter is None:
            return  # an answer to nothing we asked (or asked and gave up on): ignored
        error = message.get("error")
        if error is not None:
            waiter.error = error if isinstance(error, dict) else {"message": str(error)}
        else:
            waiter.result = message.get("result")
        waiter.done.set()
