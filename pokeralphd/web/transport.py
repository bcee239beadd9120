"""JSON-RPC 2.0 over a WebSocket: the dashboard's transport, the same protocol as the
Unix socket's.

A :class:`WebSocketConnection` is a :class:`~pokeralphd.server.connection.ClientConnection`
that reads WebSocket messages instead of a byte stream: one message is one JSON-RPC
message (a request, a notification or a batch), and every reply and event goes out as
one text message. Everything else is the Unix connection's own code: the dispatcher,
``events.subscribe`` with ``since`` and the epoch, the bounds (``max_message``,
``max_batch``, ``max_reply``, ``max_pending``, the subscriber backlog, the stall timeout)
and their errors.

Who is at the other end (:func:`loopback_peer`): the dashboard listens on loopback only,
so on Linux the TCP peer's socket is found in ``/proc/net/tcp`` and its process among
ours by the socket's inode; that process is then looked up as a Unix-socket client is
(``ProcessOwner.identify``). A browser is not ours, so it is a person; a process of one of
our runs that read the token beside the socket is still an agent; a peer of ours that
cannot be found (gone, or hiding its descriptors) is not a person. Elsewhere the peer is
taken for a person (the sandbox keeps the token out of an agent's sight there).

The outbox writes newline-framed bytes, as it does to a socket; :class:`WebSocketStream`
cuts them at the newlines (JSON never holds a raw one) into messages.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
from time import monotonic
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from pokeralphd.proc import UNKNOWN_SCOPE
from pokeralphd.protocol.framing import FrameTooLarge
from pokeralphd.server import connection
from pokeralphd.server.connection import ClientConnection

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    from pokeralphd.proc import AgentScope
    from pokeralphd.server.connection import ConnectionHost

    Message = MutableMapping[str, Any]
    Address = tuple[str, int]

log = logging.getLogger(__name__)


class WebSocketStream(anyio.abc.ByteStream):
    """An ASGI WebSocket seen as a byte stream by the outbox: what is sent is split into
    lines, each sent as a text message; :meth:`receive_message` reads one message."""

    def __init__(
        self,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        self._receive = receive
        self._send = send
        self._partial = b""
        self._closed = False

    async def receive_message(self) -> bytes | None:
        """The next message's bytes; None once the peer is gone."""
        if self._closed:
            return None
        message = await self._receive()
        kind = message["type"]
        if kind == "websocket.receive":
            text = message.get("text")
            if text is not None:
                data: bytes = text.encode()
                return data
            raw: bytes = message.get("bytes") or b""
            return raw
        self._closed = True  # websocket.disconnect
        return None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        raise anyio.EndOfStream  # the connection reads messages (receive_message)

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        data = self._partial + item if self._partial else item
        lines = data.split(b"\n")
        self._partial = lines.pop()
        send = self._send
        try:
            for line in lines:
                if line:
                    await send({"type": "websocket.send", "text": line.decode()})
        except Exception as exc:  # the server's own "disconnected" errors: the peer is gone
            self._closed = True
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._send({"type": "websocket.close", "code": 1000})
        except Exception as exc:
            log.debug("closing a WebSocket: %s", exc)


def _proc_address(address: Address) -> str | None:
    """``address`` as ``/proc/net/tcp`` or ``tcp6`` writes it: the address's 32-bit
    words in host byte order, each as 8 hex digits, then the port (``0100007F:1F90``)."""
    host, port = address
    try:
        packed = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        try:
            packed = socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            return None
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def _mapped(address: Address) -> Address:
    """An IPv4 address as an IPv6 socket connected to it shows it (``::ffff:a.b.c.d``)."""
    return ("::ffff:" + address[0], address[1]) if ":" not in address[0] else address


def _socket_inode(client: Address, server: Address) -> tuple[int, int] | None:
    """``(uid, inode)`` of the TCP socket at ``client`` connected to ``server``: the
    peer's end, not ours. None if there is no such socket (any more)."""
    for table, (local, remote) in (
        ("/proc/net/tcp", (client, server)),
        ("/proc/net/tcp6", (_mapped(client), _mapped(server))),
    ):
        want = (_proc_address(local), _proc_address(remote))
        try:
            with open(table) as file:
                next(file, None)  # the header
                for line in file:
                    fields = line.split()
                    if len(fields) > 9 and (fields[1], fields[2]) == want:
                        return int(fields[7]), int(fields[9])
        except OSError:
            continue
    return None


def _holders(inode: int) -> list[int]:
    """The pids of our processes holding the socket ``inode`` (by its descriptors; the
    daemon's own included: a client in the daemon's process is the daemon's)."""
    target = f"socket:[{inode}]"
    uid = os.getuid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            fds = os.scandir(f"/proc/{entry.name}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) == target:
                        found.append(int(entry.name))
                        break
                except OSError:
                    continue
    return found


def loopback_peer(
    client: Address | None,
    server: Address | None,
    identify: Callable[[int | None], AgentScope | None],
) -> tuple[int | None, AgentScope | None]:
    """``(pid, scope)`` of the process at ``client``, a loopback TCP peer of our
    ``server`` address (blocking: reads /proc). The scope is None for a person: a
    process not ours (another user's; the token decides about it), or one that
    ``identify`` takes for one; :data:`UNKNOWN_SCOPE` for a peer of ours we cannot find.
    """
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return None, None  # see the module docstring
    if client is None or server is None:
        return None, UNKNOWN_SCOPE
    found = _socket_inode(client, server)
    if found is None:
        return None, UNKNOWN_SCOPE  # gone (or an address we cannot read)
    uid, inode = found
    if inode == 0:
        return None, UNKNOWN_SCOPE  # closed: no process holds it any more (TIME_WAIT)
    if uid != os.getuid():
        return None, None
    holders = _holders(inode)
    if not holders:
        return None, UNKNOWN_SCOPE
    scopes = [(pid, identify(pid)) for pid in holders]
    return next(((pid, scope) for pid, scope in scopes if scope is not None), scopes[0])


class WebSocketConnection(ClientConnection):
    """A dashboard client: messages from a WebSocket, the Unix connection's handling.

    ``client`` and ``server`` (the ASGI scope's) name the TCP connection, so that
    :meth:`serve` can tell who is at the other end (:func:`loopback_peer`)."""

    stream: WebSocketStream

    def __init__(
        self,
        host: ConnectionHost,
        stream: WebSocketStream,
        client: Address | None = None,
        server: Address | None = None,
    ) -> None:
        super().__init__(host, stream, peer_pid=None)
        self.decoder.mode = "line"  # how the outbox frames replies and events (see above)
        self._peer = (client, server)

    async def serve(self) -> None:
        client, server = self._peer
        identify = self.host.services.identify
        self.peer_pid, self.scope = await anyio.to_thread.run_sync(
            loopback_peer, client, server, identify
        )
        if self.scope is not None:
            log.info(
                "WebSocket from %s (pid %s): agent scope", self.scope.describe(), self.peer_pid
            )
        await super().serve()

    async def _read_loop(self) -> None:
        receive = self.stream.receive_message
        limit = self.decoder.max_message
        while not self.outbox.closed:
            try:
                body = await receive()
            except Exception as exc:  # the server's "disconnected" errors
                log.debug("connection %d: %s", self.id, exc)
                return
            if body is None:
                return
            self._slice_end = monotonic() + connection.TIME_SLICE
            if len(body) > limit:
                await self._refuse_message(FrameTooLarge(len(body), limit))
                return
            await self._handle([body])
            await self._flush()
