"""JSON-RPC 2.0 over a WebSocket: the dashboard's transport, the same protocol as the
Unix socket's.

A :class:`WebSocketConnection` is a :class:`~pokeralphd.server.connection.ClientConnection`
that reads WebSocket messages instead of a byte stream: one message is one JSON-RPC
message (a request, a notification or a batch), and every reply and event goes out as
one text message. Everything else is the Unix connection's own code: the dispatcher,
``events.subscribe`` with ``since`` and the epoch, the bounds (``max_message``,
``max_batch``, ``max_reply``, ``max_pending``, the subscriber backlog, the stall timeout)
and their errors. A WebSocket connection is always a person's (a browser's), never an
agent's.

The outbox writes newline-framed bytes, as it does to a socket; :class:`WebSocketStream`
cuts them at the newlines (JSON never holds a raw one) into messages.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from pokeralphd.protocol.framing import FrameTooLarge
from pokeralphd.server import connection
from pokeralphd.server.connection import ClientConnection

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    from pokeralphd.server.connection import ConnectionHost

    Message = MutableMapping[str, Any]

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


class WebSocketConnection(ClientConnection):
    """A dashboard client: messages from a WebSocket, the Unix connection's handling."""

    stream: WebSocketStream

    def __init__(self, host: ConnectionHost, stream: WebSocketStream) -> None:
        super().__init__(host, stream, peer_pid=None)
        self.decoder.mode = "line"  # how the outbox frames replies and events (see above)

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
