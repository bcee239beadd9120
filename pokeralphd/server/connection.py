"""One client connection: read frames, dispatch, write replies and events.

Every complete message a read brings is handled before the replies are written together
in one send, so a pipelining client is served at full speed. Methods marked concurrent
(long waits) run beside the reader so they never hold up the connection.

One connection never starves the others: after :data:`TIME_SLICE` of work (pipelined
messages, the items of a batch) the reader yields to the event loop, and it sends what
it has gathered whenever that reaches :data:`FLUSH_BYTES`. And nothing one client sends can make the daemon hold more than a bounded amount
(see :mod:`pokeralphd.settings`): a batch has at most ``max_batch`` items, a reply at
most ``max_reply`` bytes (past it an error says so, with a hint), at most
``max_pending`` long waits run per connection; whatever the bytes, a bad message gets a
JSON-RPC error and never an exception out of the connection.
"""

from __future__ import annotations

import itertools
import logging
import sys
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
import msgspec

from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.framing import (
    FrameDecoder,
    FrameError,
    FrameTooLarge,
    encode_frame,
    split_block,
)
from pokeralphd.server.context import CallContext
from pokeralphd.server.eventbus import Event, overflow_notice
from pokeralphd.server.outbox import JoinCache, Outbox
from pokeralphd.server.replies import BatchReply, ReplyEncoder, invalid, request_id

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from anyio.abc import ByteStream, TaskGroup

    from pokeralphd.proc import AgentScope
    from pokeralphd.server.context import Services
    from pokeralphd.server.dispatch import Dispatcher
    from pokeralphd.settings import DaemonSettings

    Batch: TypeAlias = list[jsonrpc.Request | jsonrpc.InvalidMessage]
    Hooks: TypeAlias = list[Callable[[], None]]

log = logging.getLogger(__name__)
_ids = itertools.count(1)
READ_SIZE = 1 << 18
REPLY_BACKLOG = 4 << 20
FLUSH_BYTES = 1 << 20  # replies gathered before they are sent, at most
TIME_SLICE = 0.002  # seconds of one connection's work before the others get a turn
SHUTDOWN_GRACE = 5.0  # seconds a client gets to take its last replies at shutdown


class ConnectionHost(Protocol):
    """What a connection needs of the server it belongs to."""

    settings: DaemonSettings
    dispatcher: Dispatcher
    services: Services
    joins: JoinCache  # shared by the transport's outboxes (see :class:`JoinCache`)

    def opened(self, conn: ClientConnection) -> None: ...

    def closed(self, conn: ClientConnection) -> None: ...


class ConnectionSet:
    """The open connections of one transport (the Unix socket, the WebSocket): known so
    that shutdown can close them and wait, a bounded while, for them to go."""

    def __init__(self) -> None:
        self.connections: dict[int, ClientConnection] = {}
        self.joins = JoinCache()
        self._gone = anyio.Event()

    # -- ConnectionHost
    def opened(self, conn: ClientConnection) -> None:
        self.connections[conn.id] = conn

    def closed(self, conn: ClientConnection) -> None:
        self.connections.pop(conn.id, None)
        if not self.connections:
            self._gone.set()

    async def close_connections(self, grace: float) -> None:
        """Stop reading from every client (queued replies still go out), then wait up to
        ``grace`` seconds for them to close."""
        for conn in list(self.connections.values()):
            conn.close()
        with anyio.move_on_after(grace):
            if self.connections:
                self._gone = anyio.Event()
                await self._gone.wait()


class ClientConnection:
    """A client on a byte stream (the Unix socket). Everything but :meth:`_read_loop` is
    the transport-neutral part: another transport (the dashboard's WebSocket,
    :mod:`pokeralphd.web.transport`) subclasses it and reads messages its own way, with
    the same dispatch, bounds, errors and event delivery."""

    def __init__(
        self,
        host: ConnectionHost,
        stream: ByteStream,
        peer_pid: int | None = None,
        scope: AgentScope | None = None,
    ) -> None:
        settings = host.settings
        self.id = next(_ids)
        self.host = host
        self.stream = stream
        self.peer_pid = peer_pid
        # Set when the peer is a process of one of our agent runs: it may then only call
        # what an agent may (see ``Method.agent``), for its own repository and task.
        self.scope = scope
        self.decoder = FrameDecoder(settings.max_message)
        self.outbox = Outbox(
            stream,
            settings.max_subscriber_backlog,
            settings.send_stall_timeout,
            f"connection {self.id}",
            host.joins,
        )
        self.max_batch = settings.max_batch
        self.replies = ReplyEncoder(f"connection {self.id}", settings.max_reply)
        self.max_pending = settings.max_pending
        self.pending = 0  # long waits running beside the reader
        self._refused = 0
        self.subscriptions: set[int] = set()
        self._reader_scope = anyio.CancelScope()
        self._concurrent, self._sync = host.dispatcher.method_kinds()
        self._replies: list[bytes] = []  # encoded reply bodies waiting for the next flush
        self._reply_bytes = 0
        self._slice_end = 0.0
        self._tg: TaskGroup | None = None
        self.deliver = EventDelivery(self)

    def close(self) -> None:
        """Stop reading (shutdown): replies already queued are still sent, for a while,
        then the socket closes."""
        self._reader_scope.cancel()
        self.outbox.set_deadline(SHUTDOWN_GRACE)

    # -- events
    @property
    def replay_budget(self) -> int:
        """Half the subscriber backlog: a replay leaves room for what comes meanwhile."""
        return self.outbox.max_event_bytes // 2

    def _deliver(self, event: Event) -> bool:
        mode = self.decoder.mode
        if self.outbox.put_event(event.line if mode != "lsp" else event.frame(mode)):
            return True
        # Overflowed (or closing): tell the subscriber where to resume, then it is closed.
        self.outbox.put_last(overflow_notice(mode, event.seq - 1))
        return False

    # -- replies
    def _add_reply(self, reply: dict[str, Any]) -> None:
        body = self.replies.encode(reply)
        self._replies.append(body)
        self._reply_bytes += len(body)

    def _add_body(self, body: bytes) -> None:
        self._replies.append(body)
        self._reply_bytes += len(body)

    def _framed(self, bodies: list[bytes]) -> bytes:
        if self.decoder.mode == "lsp":
            return b"".join(encode_frame(body, "lsp") for body in bodies)
        bodies.append(b"")
        return b"\n".join(bodies)

    def _take_replies(self) -> bytes | None:
        if not self._replies:
            return None
        replies = self._replies.copy()  # the list stays the same object (hot loop holds it)
        self._replies.clear()
        self._reply_bytes = 0
        return self._framed(replies)

    def _queue_replies(self) -> None:
        """Hand the gathered replies to the writer now (before events that follow them)."""
        payload = self._take_replies()
        if payload is not None:
            self.outbox.put(payload)

    async def _flush(self) -> None:
        payload = self._take_replies()
        if payload is not None:
            await self.outbox.send_now(payload)
        if self.outbox.pending_bytes >= REPLY_BACKLOG:
            await self.outbox.wait_drained(REPLY_BACKLOG)

    async def _yield(self) -> None:
        """End of this connection's time slice (or of the bytes gathered): let others run.

        Replies are sent here only once FLUSH_BYTES are gathered (else at the end of the
        read): a send per slice would cost a pipelining client a wake-up each time."""
        if self._reply_bytes >= FLUSH_BYTES:
            await self._flush()
        await anyio.lowlevel.checkpoint()
        self._slice_end = monotonic() + TIME_SLICE

    def _run_hooks(self, hooks: Hooks) -> None:
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("connection %d: an after-reply hook failed", self.id)

    # -- requests
    async def _dispatch(
        self, parsed: jsonrpc.Request, hooks: Hooks | None = None
    ) -> dict[str, Any] | None:
        """Run one request. Its after-reply hooks (a replay) go to ``hooks`` when given
        (a batch runs them after its whole reply); else the reply is queued, then they run."""
        ctx = CallContext(self.host.services, self)
        reply = await self.host.dispatcher.call(parsed, ctx)
        if ctx.after_reply:
            if hooks is not None:
                hooks.extend(ctx.after_reply)
                return reply
            self._reply_then_hooks(reply, ctx.after_reply)
            return None
        return reply

    def _reply_then_hooks(self, reply: dict[str, Any] | None, hooks: Hooks) -> None:
        """Queue the replies gathered so far and ``reply``, then run ``hooks`` (a replay's
        events follow the subscription's reply)."""
        if reply is not None:
            self._add_reply(reply)
        self._queue_replies()
        self._run_hooks(hooks)

    async def _body(self, body: bytes) -> None:
        """One message body, whatever its bytes: a reply (or none) is gathered. A single
        request goes the one way every single request goes (:meth:`_handle_requests`);
        a batch its own (:meth:`_batch`)."""
        fast = jsonrpc.decode_fast([body])
        if fast is not None:
            await self._handle_requests(fast)
            return
        try:
            obj = jsonrpc.decode(body)
        except jsonrpc.ParseError as exc:
            self._add_reply(
                jsonrpc.error_response(
                    None, ErrorCode.PARSE_ERROR, "Parse error", {"detail": str(exc)}
                )
            )
            return
        if isinstance(obj, list):
            await self._batch(obj)
            return
        parsed = jsonrpc.parse_request(obj)
        if isinstance(parsed, jsonrpc.InvalidMessage):
            self._add_reply(invalid(parsed.id, parsed.reason))
            return
        await self._handle_requests([parsed])

    async def _batch(self, items: list[Any]) -> None:
        if not items:
            self._add_reply(invalid(None, "empty batch"))
            return
        if len(items) > self.max_batch:
            self._add_reply(
                invalid(
                    None,
                    f"a batch of {len(items)} requests exceeds the limit of {self.max_batch}; "
                    "split it (nothing in it was run)",
                    limit=self.max_batch,
                )
            )
            return
        parsed: Batch = [jsonrpc.parse_request(item) for item in items]
        concurrent = self._concurrent
        if any(isinstance(p, jsonrpc.Request) and p.method in concurrent for p in parsed):
            self._start_wait(parsed)  # a long wait inside: the whole batch runs beside us
            return
        hooks: Hooks = []
        body = await self._run_batch(parsed, hooks, inline=True)
        if body is not None:
            self._add_body(body)
        if hooks:
            self._queue_replies()
            self._run_hooks(hooks)

    async def _run_batch(self, parsed: Batch, hooks: Hooks, *, inline: bool) -> bytes | None:
        # Each reply is encoded as it comes, inside the time slices, not all at the end.
        batch = BatchReply(self.replies)
        for item in parsed:
            if isinstance(item, jsonrpc.InvalidMessage):
                batch.add(invalid(item.id, item.reason))
            else:
                try:
                    reply = await self._dispatch(item, hooks)
                except Exception:
                    reply = self._failed(item)
                if reply is not None:
                    batch.add(reply)
            if monotonic() >= self._slice_end:
                if inline:
                    await self._yield()
                else:
                    await anyio.lowlevel.checkpoint()
        return batch.join() if batch.parts else None

    # -- long waits, beside the reader
    def _start_wait(self, work: jsonrpc.Request | Batch) -> None:
        if self.pending >= self.max_pending or self._tg is None:
            self._refuse_wait(work)
            return
        self.pending += 1
        self._tg.start_soon(self._run_wait, work)

    def _refuse_wait(self, work: jsonrpc.Request | Batch) -> None:
        """Too many long waits already: every request of ``work`` gets an error at once."""
        items = [work] if isinstance(work, jsonrpc.Request) else work
        replies: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, jsonrpc.InvalidMessage):
                replies.append(invalid(item.id, item.reason))
            elif not item.is_notification:
                replies.append(
                    jsonrpc.error_response(
                        None if isinstance(item.id, msgspec.UnsetType) else item.id,
                        ErrorCode.TOO_MANY_PENDING,
                        f"{self.max_pending} long waits are already pending on this connection",
                        {
                            "limit": self.max_pending,
                            "method": item.method,
                            "hint": "wait for earlier calls to return, or use another connection",
                        },
                    )
                )
        self._refused += 1
        if self._refused == 1 or self._refused % 1000 == 0:  # once, then now and then
            log.info(
                "connection %d: refused %d long wait(s) past max_pending (%d)",
                self.id,
                self._refused,
                self.max_pending,
            )
        if not replies:
            return
        if isinstance(work, jsonrpc.Request):
            self._add_reply(replies[0])
        else:
            self._add_body(self.replies.batch(replies))

    async def _run_wait(self, work: jsonrpc.Request | Batch) -> None:
        try:
            hooks: Hooks = []
            if isinstance(work, jsonrpc.Request):
                reply = await self._dispatch(work, hooks)
                body = None if reply is None else self.replies.encode(reply)
            else:
                body = await self._run_batch(work, hooks, inline=False)
            if body is not None:
                self.outbox.put(encode_frame(body, self.decoder.mode))
            self._run_hooks(hooks)
        except Exception:
            failed = self._failed(work if isinstance(work, jsonrpc.Request) else None)
            if failed is not None:
                self.outbox.put(encode_frame(jsonrpc.encode(failed), self.decoder.mode))
        finally:
            self.pending -= 1

    # -- the connection's life
    async def serve(self) -> None:
        self.host.opened(self)
        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(self.outbox.run)
                with self._reader_scope:
                    # Long waits (concurrent methods) live in the inner group: they end
                    # with the reader, when the client goes away or the daemon stops.
                    async with anyio.create_task_group() as inner:
                        self._tg = inner
                        await self._read_loop()
                        inner.cancel_scope.cancel()
                self.outbox.close_after_flush()
        finally:
            self._tg = None
            bus = self.host.services.bus
            for sub_id in self.subscriptions:
                bus.unsubscribe(sub_id)
            self.host.closed(self)

    async def _read_loop(self) -> None:
        while not self.outbox.closed:
            try:
                data = await self.stream.receive(READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError:
                return
            self._slice_end = monotonic() + TIME_SLICE
            try:
                frames = self.decoder.feed_block(data)
            except FrameTooLarge as exc:
                await self._refuse_message(exc)
                return
            except FrameError as exc:
                self._add_reply(
                    jsonrpc.error_response(
                        None,
                        ErrorCode.PARSE_ERROR,
                        "Parse error",
                        {
                            "detail": str(exc),
                            "hint": "the framing is lost; the connection is closed",
                        },
                    )
                )
                log.info("connection %d: %s; closing", self.id, exc)
                await self._flush()
                return
            if frames:
                await self._handle(frames)
            await self._flush()

    async def _refuse_message(self, exc: FrameTooLarge) -> None:
        """A message past max_message: say so, send what is gathered; the caller closes."""
        self._add_reply(
            jsonrpc.error_response(
                None,
                ErrorCode.MESSAGE_TOO_LARGE,
                str(exc),
                {"limit": exc.limit, "hint": "split the request; the connection is closed"},
            )
        )
        log.warning("connection %d: %s; closing", self.id, exc)
        await self._flush()

    async def _handle(self, frames: bytes | list[bytes]) -> None:
        """The messages of one read: a block of lines or a list of bodies (see
        :meth:`FrameDecoder.feed_block`)."""
        # Fast path: every message of the read is a single well-formed request: decode
        # them all in one pass.
        many = jsonrpc.decode_fast(frames)
        if many is not None:
            await self._handle_requests(many)
            return
        bodies = split_block(frames) if isinstance(frames, bytes) else frames
        for body in bodies:
            try:
                await self._body(body)
            except Exception:
                self._internal_error(None)  # which request failed is not known here
            if self._reply_bytes >= FLUSH_BYTES or monotonic() >= self._slice_end:
                await self._yield()

    async def _handle_requests(self, requests: list[jsonrpc.Request]) -> None:
        """Every single request's way (a batch's items take :meth:`_run_batch`, long
        waits :meth:`_run_wait`): a long wait starts beside the reader; any other is
        called (synchronous handlers without a coroutine), its reply encoded and
        gathered. The hot loop of a pipelining client, so :meth:`_dispatch`,
        :meth:`_add_reply` and the reply's encoding are inlined, the reply bytes counted in a
        local (written back whenever another method may add replies, so the bounds stay
        exact)."""
        concurrent = self._concurrent
        sync = self._sync
        call = self.host.dispatcher.call
        call_now = self.host.dispatcher.call_now
        services = self.host.services
        encode = jsonrpc.encode
        clock = monotonic
        max_reply = self.replies.max_reply
        too_large = self.replies.too_large
        replies = self._replies  # _take_replies empties it in place: the same list
        gathered = self._reply_bytes
        slice_end = self._slice_end
        # One CallContext serves request after request as long as no handler keeps it, or
        # its after_reply list, past its call (making one per request was an eighth of a
        # ping's cost). That nothing else holds them is read from their reference counts,
        # compared with those of a fresh context held here alone.
        refs = sys.getrefcount
        ctx = CallContext(services, self)
        alone, list_alone = refs(ctx), refs(ctx.after_reply)
        for request in requests:
            try:
                if request.method in concurrent:
                    self._reply_bytes = gathered
                    self._start_wait(request)  # a refusal is a reply: counted
                    gathered = self._reply_bytes
                else:
                    if refs(ctx) != alone or refs(ctx.after_reply) != list_alone:
                        ctx = CallContext(services, self)  # kept by someone: theirs now
                    if request.method in sync:
                        answer = call_now(request, ctx)  # no coroutine to make and run
                    else:
                        answer = await call(request, ctx)
                    if ctx.after_reply:  # rare (a replay): the reply goes out before them
                        self._reply_bytes = gathered
                        self._reply_then_hooks(answer, ctx.after_reply)
                        gathered = self._reply_bytes
                        ctx = CallContext(services, self)
                    elif answer is not None:
                        body = encode(answer)
                        if len(body) > max_reply:
                            body = too_large(request_id(answer), len(body))
                        replies.append(body)
                        gathered += len(body)
            except Exception:
                self._reply_bytes = gathered
                self._internal_error(request)
                gathered = self._reply_bytes
                ctx = CallContext(services, self)
            if gathered >= FLUSH_BYTES or clock() >= slice_end:
                self._reply_bytes = gathered
                await self._yield()
                gathered = self._reply_bytes
                slice_end = self._slice_end
        self._reply_bytes = gathered

    def _internal_error(self, request: jsonrpc.Request | None) -> None:
        failed = self._failed(request)
        if failed is not None:
            self._add_reply(failed)

    def _failed(self, request: jsonrpc.Request | None) -> dict[str, Any] | None:
        """A bug, not the client's doing: log it, and say so (unless it was a
        notification); the connection goes on."""
        log.exception("connection %d: failed to handle a message", self.id)
        if request is not None and request.is_notification:
            return None
        rid = None if request is None or isinstance(request.id, msgspec.UnsetType) else request.id
        return jsonrpc.error_response(
            rid, ErrorCode.INTERNAL_ERROR, "Internal error", {"hint": "see the daemon log"}
        )


class EventDelivery:
    """A connection's ``deliver`` (what :meth:`EventBus.subscribe` takes): queue an event
    for the client, False once it is gone. ``put_line`` is the shortcut the bus takes
    while the connection speaks line framing: the outbox's own ``put_event``, handed the
    event's line frame as is (one call per delivery, not three)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn

    def __call__(self, event: Event) -> bool:
        return self._conn._deliver(event)

    @property
    def put_line(self) -> Callable[[bytes], bool] | None:
        conn = self._conn
        return conn.outbox.put_event if conn.decoder.mode == "line" else None
