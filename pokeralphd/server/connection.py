"""One client connection: read frames, dispatch, write replies and events.

Every complete message a read brings is handled before the replies are written together
in one send, so a pipelining client is served at full speed. Methods marked concurrent
(long waits) run beside the reader so they never hold up the connection.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.framing import FrameDecoder, FrameError, FrameTooLarge, encode_frame
from pokeralphd.server.dispatch import CallContext, Dispatcher
from pokeralphd.server.eventbus import Event, overflow_notice
from pokeralphd.server.outbox import Outbox

if TYPE_CHECKING:
    from anyio.abc import ByteStream, TaskGroup

    from pokeralphd.daemon import Daemon

log = logging.getLogger(__name__)
_ids = itertools.count(1)
READ_SIZE = 1 << 18
REPLY_BACKLOG = 4 << 20


class ClientConnection:
    def __init__(self, daemon: Daemon, stream: ByteStream, peer_pid: int | None = None) -> None:
        self.id = next(_ids)
        self.daemon = daemon
        self.stream = stream
        self.peer_pid = peer_pid
        self.decoder = FrameDecoder(daemon.settings.max_message)
        self.outbox = Outbox(stream, daemon.settings.max_subscriber_backlog)
        self.subscriptions: set[int] = set()
        self._reader_scope = anyio.CancelScope()

    def close(self) -> None:
        """Stop reading (shutdown): replies already queued are still sent, then the socket closes."""
        self._reader_scope.cancel()

    # -- events
    def deliver(self, event: Event) -> bool:
        mode = self.decoder.mode
        if self.outbox.put_event(event.frame(mode)):
            return True
        # Overflowed (or closing): tell the subscriber where to resume, then it is closed.
        self.outbox.put_last(overflow_notice(mode, event.seq - 1))
        return False

    # -- replies
    def _send(self, messages: list[dict[str, Any]] | dict[str, Any]) -> None:
        self.outbox.put(encode_frame(jsonrpc.encode(messages), self.decoder.mode))

    async def _handle_body(self, body: bytes) -> dict[str, Any] | list[Any] | None:
        fast = jsonrpc.decode_request_fast(body) if body[:1] == b"{" else None
        if fast is not None:
            return await self._dispatch(fast)
        try:
            obj = jsonrpc.decode(body)
        except jsonrpc.ParseError as exc:
            return jsonrpc.error_response(
                None, ErrorCode.PARSE_ERROR, "Parse error", {"detail": str(exc)}
            )
        if isinstance(obj, list):
            if not obj:
                return jsonrpc.error_response(
                    None, ErrorCode.INVALID_REQUEST, "Invalid Request", {"detail": "empty batch"}
                )
            replies = [r for r in [await self._handle_one(item) for item in obj] if r is not None]
            return replies or None
        return await self._handle_one(obj)

    async def _handle_one(self, obj: Any) -> dict[str, Any] | None:
        parsed = jsonrpc.parse_request(obj)
        if isinstance(parsed, jsonrpc.InvalidMessage):
            return jsonrpc.error_response(
                parsed.id, ErrorCode.INVALID_REQUEST, "Invalid Request", {"detail": parsed.reason}
            )
        return await self._dispatch(parsed)

    async def _dispatch(self, parsed: jsonrpc.Request) -> dict[str, Any] | None:
        ctx = CallContext(self.daemon, self)
        reply = await self.daemon.dispatcher.call(parsed, ctx)
        if ctx.after_reply:
            # Replay queued by the handler goes out after its reply.
            if reply is not None:
                self._send(reply)
                reply = None
            for hook in ctx.after_reply:
                hook()
        return reply

    def _needs_task(self, body: bytes, dispatcher: Dispatcher) -> bool:
        # Cheap check before decoding twice: only bodies naming a concurrent method.
        return any(name in body for name in dispatcher.concurrent_names)

    async def _run_concurrent(self, body: bytes) -> None:
        reply = await self._handle_body(body)
        if reply is not None:
            self._send(reply)

    async def serve(self) -> None:
        daemon = self.daemon
        daemon.connections[self.id] = self
        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(self.outbox.run)
                with self._reader_scope:
                    # Long waits (concurrent methods) live in the inner group: they end
                    # with the reader, when the client goes away or the daemon stops.
                    async with anyio.create_task_group() as inner:
                        await self._read_loop(inner)
                        inner.cancel_scope.cancel()
                self.outbox.close_after_flush()
        finally:
            for sub_id in self.subscriptions:
                daemon.bus.unsubscribe(sub_id)
            daemon.connections.pop(self.id, None)
            if not daemon.connections:
                daemon.connections_gone.set()

    async def _read_loop(self, tg: TaskGroup) -> None:
        dispatcher = self.daemon.dispatcher
        while not self.outbox.closed:
            try:
                data = await self.stream.receive(READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError:
                return
            try:
                bodies = self.decoder.feed(data)
            except FrameTooLarge as exc:
                self._send(
                    jsonrpc.error_response(
                        None,
                        ErrorCode.MESSAGE_TOO_LARGE,
                        str(exc),
                        {"limit": exc.limit, "hint": "split the request; the connection is closed"},
                    )
                )
                log.warning("connection %d: %s; closing", self.id, exc)
                return
            except FrameError as exc:
                self._send(jsonrpc.error_response(None, ErrorCode.PARSE_ERROR, str(exc)))
                return
            replies: list[bytes] = []
            # Fast path: nothing in this read may need its own task, and every message is a
            # single well-formed request: decode them all in one pass.
            many = (
                jsonrpc.decode_many_fast(bodies)
                if bodies and not any(name in data for name in dispatcher.concurrent_names)
                else None
            )
            if many is not None:
                encode = jsonrpc.encode
                for request in many:
                    answer = await self._dispatch(request)
                    if answer is not None:
                        replies.append(encode(answer))
            else:
                for body in bodies:
                    if self._needs_task(body, dispatcher):
                        tg.start_soon(self._run_concurrent, body)
                        continue
                    reply = await self._handle_body(body)
                    if reply is not None:
                        replies.append(jsonrpc.encode(reply))
            if replies:
                if self.decoder.mode == "lsp":
                    await self.outbox.send_now(b"".join(encode_frame(r, "lsp") for r in replies))
                else:
                    replies.append(b"")
                    await self.outbox.send_now(b"\n".join(replies))
            if self.outbox.pending_bytes >= REPLY_BACKLOG:
                await self.outbox.wait_drained(REPLY_BACKLOG)
