"""A small JSON-RPC 2.0 client for pokeralphd, standard library only.

This is also the reference client for plugin authors: newline-delimited JSON over a
Unix socket, one request at a time, notifications (events) handed to a callback.

::

    ClientError
    ├── DaemonNotRunning      nothing listens on the socket (exit code 3 in the CLI)
    └── RequestFailed         the daemon answered with a JSON-RPC error (exit code 1)
"""

from __future__ import annotations

import json
import socket

from pokeralphctl.paths import socket_path

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterator
    from typing import Any


class ClientError(Exception):
    """Base of the client's errors."""


class DaemonNotRunning(ClientError):
    """Raised when no daemon answers on the socket."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(
            f"pokeralphd is not running on {path} ({reason}).\n"
            "Start it with `pokeralphctl daemon start`, or `systemctl --user start pokeralphd`."
        )


class RequestFailed(ClientError):
    """Raised when the daemon answers a request with an error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)


class Connection:
    """One connection to the daemon; use as a context manager."""

    def __init__(self, path: str | os.PathLike[str] | None = None, timeout: float | None = 30):
        self.path = socket_path(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(self.path))
        except FileNotFoundError as exc:
            self._sock.close()
            raise DaemonNotRunning(self.path, "no socket file") from exc
        except ConnectionRefusedError as exc:
            self._sock.close()
            raise DaemonNotRunning(self.path, "connection refused: stale socket") from exc
        except OSError as exc:
            self._sock.close()
            raise DaemonNotRunning(self.path, exc.strerror or str(exc)) from exc
        self._buf = b""
        self._next_id = 0
        self.on_event: Callable[[dict[str, Any]], None] | None = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message the daemon sends, in order, until it closes the connection."""
        while True:
            newline = self._buf.find(b"\n")
            while newline < 0:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    return
                self._buf += chunk
                newline = self._buf.find(b"\n")
            line, self._buf = self._buf[:newline], self._buf[newline + 1 :]
            if line.strip():
                yield json.loads(line)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send a request and return its result; events arriving meanwhile go to on_event."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        for reply in self.messages():
            if "id" not in reply:
                if self.on_event is not None:
                    self.on_event(reply)
                continue
            if reply.get("id") != request_id:
                continue
            if "error" in reply:
                err = reply["error"]
                raise RequestFailed(err.get("code", 0), err.get("message", ""), err.get("data"))
            return reply.get("result")
        raise RequestFailed(-32603, "the daemon closed the connection before answering")


def call(method: str, params: dict[str, Any] | None = None, path: str | None = None) -> Any:
    """One request on a fresh connection."""
    with Connection(path) as conn:
        return conn.call(method, params)
