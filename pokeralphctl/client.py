"""A small JSON-RPC 2.0 client for pokeralphd, standard library only.

This is also the reference client for plugin authors: newline-delimited JSON over a
Unix socket, one request at a time or several pipelined (:meth:`Connection.call_many`),
notifications (events) handed to a callback. Its
public names are those in ``__all__``; the error codes are in :mod:`pokeralphctl.codes`.

::

    ClientError
    ├── DaemonNotRunning      nothing listens on the socket (exit code 3 in the CLI)
    │   └── UntrustedSocket   the socket, or the process behind it, is not the user's own
    └── RequestFailed         the daemon answered with a JSON-RPC error (exit code 1)

Events: :meth:`Connection.subscribe` subscribes the connection; an :class:`EventCursor`
passed to it keeps the place across reconnects and notices a restarted daemon (by its
``epoch``), whose sequence numbers start again and mean nothing to the old ones::

    cursor = EventCursor()
    while True:
        with Connection() as conn:
            conn.subscribe(cursor, repo="myproject")
            if cursor.restarted:
                print(RESTARTED)
            for message in conn.messages():
                if message.get("method") == "event" and cursor.advance(message["params"]):
                    handle(message["params"])
        # the connection dropped: reconnect (wait until a daemon answers first)

Before sending anything the client makes sure it talks to the user's own daemon: the
socket file must not be a link and must belong to the user, and right after connecting
the peer's uid (``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS) must be the
user's. Otherwise another user who got hold of the socket's folder could pose as
pokeralphd and read what the client sends (an API key in ``config.update``).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys

from pokeralph_core.paths import socket_path
from pokeralphctl import codes

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any

__all__ = [
    "RESTARTED",
    "ClientError",
    "Connection",
    "DaemonNotRunning",
    "EventCursor",
    "RequestFailed",
    "UntrustedSocket",
    "call",
    "check_peer",
    "check_socket_file",
    "peer_uid",
    "socket_path",
]

#: What to tell a person when the daemon under a subscription restarted.
RESTARTED = "the daemon restarted; events from before are not replayed"


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


class UntrustedSocket(DaemonNotRunning):
    """Raised when the socket file or the process behind it does not belong to the user.

    A kind of :class:`DaemonNotRunning`: the user's own daemon is not the one there.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        ClientError.__init__(
            self,
            f"refusing to talk to {path}: {reason}; it may be another user's impostor.\n"
            "Remove it, or set XDG_RUNTIME_DIR (or POKERALPH_SOCKET) to a folder only you "
            "can write.",
        )


def check_socket_file(path: str) -> None:
    """Refuse a socket file that is a link or belongs to another user (before connecting)."""
    if path.startswith("\0"):
        return  # abstract socket: no file; the peer check still applies
    try:
        info = os.lstat(path)
    except OSError:
        return  # connect() says what is wrong, in its own words
    if stat.S_ISLNK(info.st_mode):
        raise UntrustedSocket(path, "it is a symbolic link")
    if info.st_uid != os.getuid():
        raise UntrustedSocket(path, f"it belongs to uid {info.st_uid}, not to you")


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None: no way to tell)."""
    if hasattr(socket, "SO_PEERCRED"):  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        return int.from_bytes(raw[4:8], sys.byteorder)
    if sys.platform == "darwin":  # pragma: no cover - LOCAL_PEERCRED, struct xucred
        raw = sock.getsockopt(0, 0x001, 76)
        return int.from_bytes(raw[4:8], sys.byteorder)
    return None  # pragma: no cover


def check_peer(path: str, uid: int | None, expected: int) -> None:
    """Refuse a peer that runs as another user (``uid`` None: unknown, the file check stands)."""
    if uid is not None and uid != expected:
        raise UntrustedSocket(
            path, f"the process behind it runs as uid {uid}, not as you (uid {expected})"
        )


class RequestFailed(ClientError):
    """Raised when the daemon answers a request with an error object.

    ``code`` is one of :mod:`pokeralphctl.codes` (``name`` gives its name), ``data`` the
    error's details (``data.field`` names a bad param).
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)

    @property
    def name(self) -> str | None:
        """The code's name (``VERSION_CONFLICT``), or None for a code this client lacks."""
        return codes.NAMES.get(self.code)


class EventCursor:
    """Where a reader of the event stream stands: the daemon and the last event seen.

    Sequence numbers (``seq``) belong to one daemon process, which its ``epoch`` names
    (``daemon.status`` and the ``events.subscribe`` reply carry it). After a reconnect
    to the same daemon, subscribing with ``since`` = the last ``seq`` seen replays what
    was missed. A restarted daemon counts from 1 again: a ``since`` from before would
    skip or repeat events of another process, so the cursor asks for the new daemon's
    whole history instead (``since`` 0) and sets :attr:`restarted`. What the old daemon
    published after the connection dropped is gone: tell the person (:data:`RESTARTED`)
    and reload the state you show.

    ``seq`` None means "from now": the first subscription starts at the daemon's
    current sequence number.
    """

    def __init__(self, seq: int | None = None, epoch: str | None = None) -> None:
        #: The last sequence number seen (or the daemon's when subscribed from now).
        self.seq = seq
        #: The epoch of the daemon ``seq`` belongs to (None until a subscription).
        self.epoch = epoch
        #: Whether the last subscription found another daemon than the one before.
        self.restarted = False

    def is_restart(self, epoch: str | None) -> bool:
        """Whether the daemon of ``epoch`` is not the one the cursor was on."""
        return self.epoch is not None and epoch is not None and epoch != self.epoch

    def since(self, epoch: str | None) -> int | None:
        """The ``since`` to subscribe with to the daemon of ``epoch`` (None: from now)."""
        return 0 if self.is_restart(epoch) else self.seq

    def subscribed(self, result: dict[str, Any]) -> bool:
        """Record an ``events.subscribe`` reply (made with :meth:`since`); whether the
        daemon restarted since the cursor last saw it."""
        epoch = result.get("epoch")
        self.restarted = self.is_restart(epoch)
        if self.restarted:
            self.seq = 0  # the new daemon's history is replayed from its start
        elif self.seq is None:
            self.seq = result.get("seq", 0)
        if epoch is not None:
            self.epoch = epoch
        return self.restarted

    def advance(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` (an ``event`` notification's params) is new; if so the
        cursor moves past it. A replay that overlaps what was seen is dropped."""
        seq = event.get("seq")
        if not isinstance(seq, int):
            return True
        if self.seq is not None and seq <= self.seq:
            return False
        self.seq = seq
        return True


class Connection:
    """One connection to the daemon; use as a context manager."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        timeout: float | None = 30,
        environ: Mapping[str, str] | None = None,
    ):
        self.path = socket_path(path, environ)
        check_socket_file(self.path)
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
        try:
            check_peer(self.path, peer_uid(self._sock), os.getuid())
        except BaseException:
            self._sock.close()
            raise
        self._buf = b""
        self._next_id = 0
        self._early: list[dict[str, Any]] = []  # events read by subscribe, for messages()
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
        """Every message the daemon sends, in order, until it closes the connection
        (first the events :meth:`subscribe` read before its reply)."""
        while self._early:
            yield self._early.pop(0)
        yield from self._read()

    def _read(self) -> Iterator[dict[str, Any]]:
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
        (answer,) = self.call_many([(method, params)])
        if isinstance(answer, RequestFailed):
            raise answer
        return answer

    def call_many(self, calls: Sequence[tuple[str, dict[str, Any] | None]]) -> list[Any]:
        """Several requests pipelined: written at once, answered in one round trip.

        ``calls`` are ``(method, params)`` pairs; the answers come back in their order,
        each the call's result or the :class:`RequestFailed` it got (returned, not
        raised: one refused call does not hide the others' results). Events arriving
        meanwhile go to on_event.
        """
        first = self._next_id + 1
        lines = []
        for method, params in calls:
            self._next_id += 1
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
            if params is not None:
                message["params"] = params
            lines.append(json.dumps(message, separators=(",", ":")))
        if not lines:
            return []
        lines.append("")
        self._sock.sendall("\n".join(lines).encode())
        last = self._next_id
        answers: dict[int, Any] = {}
        for reply in self._read():
            if "id" not in reply:
                if self.on_event is not None:
                    self.on_event(reply)
                continue
            rid = reply.get("id")
            if type(rid) is not int or not first <= rid <= last or rid in answers:
                continue
            if "error" in reply:
                err = reply["error"]
                answers[rid] = RequestFailed(
                    err.get("code", 0), err.get("message", ""), err.get("data")
                )
            else:
                answers[rid] = reply.get("result")
            if len(answers) == len(lines) - 1:
                return [answers[rid] for rid in range(first, last + 1)]
        raise RequestFailed(
            codes.INTERNAL_ERROR, "the daemon closed the connection before answering"
        )

    def subscribe(
        self,
        cursor: EventCursor | None = None,
        *,
        repo: str | None = None,
        types: list[str] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Subscribe this connection to events (filtered by repository, types, task);
        the ``events.subscribe`` result.

        With a ``cursor``, resume where it stands: on the same daemon the events after
        its ``seq`` are replayed; on a restarted one (another epoch, asked for first with
        ``daemon.status`` on this same connection) the new daemon's whole history is,
        and ``cursor.restarted`` is set. Events that arrive before the reply go to
        :attr:`on_event` if it is set, else :meth:`messages` yields them first.
        """
        params: dict[str, Any] = {}
        if repo is not None:
            params["repo"] = repo
        if types:
            params["types"] = types
        if task_id is not None:
            params["taskId"] = task_id
        if cursor is not None:
            since = cursor.since(self.call("daemon.status").get("epoch"))
            if since is not None:
                params["since"] = since
        keep = self.on_event is None
        if keep:
            self.on_event = self._early.append
        try:
            result: dict[str, Any] = self.call("events.subscribe", params)
        finally:
            if keep:
                self.on_event = None
        if cursor is not None:
            cursor.subscribed(result)
        return result


def call(method: str, params: dict[str, Any] | None = None, path: str | None = None) -> Any:
    """One request on a fresh connection."""
    with Connection(path) as conn:
        return conn.call(method, params)
