"""A connection's outgoing queue: replies and events written by one writer task.

Producers never block: they append bytes and wake the writer, which sends everything
queued, in sends of at most :data:`CHUNK` bytes. Frames queued in a row are joined into
chunks of about that size as they come (:data:`COALESCE`), while they are still in the
processor's cache (a burst of events is thousands of small frames: joining them all at
write time read each one back from memory, for every subscriber). Replies are throttled
at the source (the reader waits while the backlog is large); events are bounded, and a
subscriber whose backlog overflows is told and disconnected, so a client that stops
reading costs nobody else anything.

A frame, once started, is finished: a client that reads slowly gets every byte, however
long it takes, as long as it keeps reading (each 64 KiB must be taken within the stall
timeout). Only a client that stops reading altogether, or the daemon's shutdown
deadline, ends a write part-way; the connection is then closed at once (nothing more is
written after half a frame) and the daemon logs it.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anyio.abc import ByteStream

log = logging.getLogger(__name__)

CHUNK = 64 << 10  # a client must take this much within the stall timeout
COALESCE = CHUNK - (4 << 10)  # frames queued in a row are joined once they reach this
OVERFLOW_GRACE = 1.0  # seconds a dropped (overflowed) subscriber gets for its notice


class JoinCache:
    """The last run of frames joined, and its join, shared by the outboxes of one
    transport: the subscribers of a burst of events get the same frames in the same
    runs, so the first outbox joins them and the others take its chunk after comparing
    the lists (which compares the very same objects first)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[list[bytes], bytes] = ([], b"")

    def join(self, run: list[bytes]) -> bytes:
        last_run, joined = self._last  # one read: (run, its join) always belong together
        if run != last_run:
            joined = b"".join(run)
            self._last = (run, joined)
        return joined


class Outbox:
    def __init__(
        self,
        stream: ByteStream,
        max_event_bytes: int = 8 << 20,
        stall_timeout: float = 30.0,
        label: str = "connection",
        joins: JoinCache | None = None,
    ) -> None:
        self._stream = stream
        self._joins = joins if joins is not None else JoinCache()
        self._chunks: list[bytes] = []
        self._pending = 0
        self._run_start = 0  # the frames of _chunks from here on are joined at COALESCE
        self._run_bytes = 0
        self._wake = anyio.Event()
        self._drained = anyio.Event()
        self._drained.set()
        self._closing = False
        self.closed = False
        self.max_event_bytes = max_event_bytes
        self.stall_timeout = stall_timeout
        self.label = label
        self._lock = anyio.Lock()  # one sender at a time: the writer task or send_now
        self._deadline = math.inf  # set at shutdown (or overflow): every write ends by then
        self._deadline_why = ""
        self._final_stall = stall_timeout  # shortened for an overflowed subscriber
        self._scopes: set[anyio.CancelScope] = set()

    @property
    def pending_bytes(self) -> int:
        return self._pending

    def _queue(self, data: bytes) -> None:
        chunks = self._chunks
        chunks.append(data)
        self._pending += len(data)
        run = self._run_bytes + len(data)
        if run < COALESCE:
            self._run_bytes = run
        else:
            self._coalesce()

    def _coalesce(self) -> None:
        """Join the frames queued since the last join into one chunk."""
        chunks, start = self._chunks, self._run_start
        if len(chunks) - start > 1:
            chunks[start:] = [self._joins.join(chunks[start:])]
        self._run_start = len(chunks)
        self._run_bytes = 0

    def put(self, data: bytes) -> None:
        """Queue a reply (or several, already framed)."""
        if self._closing:  # (closed implies closing)
            return
        self._queue(data)
        self._drained = anyio.Event() if self._drained.is_set() else self._drained
        self._wake.set()

    def put_event(self, data: bytes) -> bool:
        """Queue an event without blocking; False when the backlog is full (or closing)."""
        if self._closing:  # (closed implies closing)
            return False
        size = len(data)
        pending = self._pending + size
        if pending > self.max_event_bytes:
            return False
        chunks = self._chunks
        chunks.append(data)
        self._pending = pending
        run = self._run_bytes + size  # _queue inlined: this runs once per delivery
        if run < COALESCE:
            self._run_bytes = run
        else:
            self._coalesce()
        if len(chunks) > 1:
            return True  # already queued: the writer is awake and _drained is clear
        if self._drained.is_set():
            self._drained = anyio.Event()
        self._wake.set()
        return True

    def put_last(self, data: bytes) -> None:
        """Queue a final message (the overflow notice) and close once it is flushed.

        The peer is known not to keep up: once a write under way is done (bounded by the
        stall timeout), the rest gets a short grace, not the stall timeout.
        """
        if self._closing:  # (closed implies closing)
            return
        self._queue(data)
        self._final_stall = min(self.stall_timeout, OVERFLOW_GRACE)
        self.close_after_flush()

    def close_after_flush(self) -> None:
        self._closing = True
        self._wake.set()

    def set_deadline(self, seconds: float, why: str = "the daemon is shutting down") -> None:
        """Whatever is being or will be written must be out within ``seconds``."""
        deadline = anyio.current_time() + seconds
        if deadline < self._deadline:
            self._deadline = deadline
            self._deadline_why = why
        for scope in self._scopes:
            scope.deadline = min(scope.deadline, self._deadline)

    def _abort(self, why: str, size: int) -> None:
        """Close without writing another byte: the stream may stand mid-frame."""
        log.warning("%s: %s during a %d-byte write; closing the connection", self.label, why, size)
        self.closed = True
        self._closing = True
        self._chunks.clear()
        self._run_start = self._run_bytes = 0
        self._drained.set()
        self._wake.set()  # the writer closes the stream

    async def _write(self, chunks: list[bytes], stall: float) -> bool:
        """Send ``chunks`` whole, in order; False if the peer took nothing for ``stall``
        seconds (each send is at most CHUNK bytes)."""
        send = self._stream.send
        for piece in _pieces(chunks):
            with anyio.move_on_after(stall):
                await send(piece)
                continue
            return False
        return True

    async def _guarded_write(self, chunks: list[bytes], stall: float, *, shield: bool) -> bool:
        """Write under the shutdown deadline; on a stall or the deadline, abort. True if sent."""
        ok = False
        with anyio.CancelScope(shield=shield, deadline=self._deadline) as scope:
            self._scopes.add(scope)
            try:
                ok = await self._write(chunks, stall)
            finally:
                self._scopes.discard(scope)
        if not ok:
            why = (
                self._deadline_why
                if scope.cancelled_caught
                else f"the client read nothing for {stall:g} s"
            )
            self._abort(why, sum(map(len, chunks)))
        return ok

    async def send_now(self, data: bytes) -> None:
        """Send at once from the caller's task when nothing is queued (saves a task switch
        per reply on a request/response connection); else queue behind what is waiting."""
        if self._chunks or self._lock.locked() or self._closing:
            self.put(data)
            return
        try:
            # Shielded: a reply already computed is delivered even if the reader is being
            # cancelled (daemon.shutdown answers before the daemon stops); the shutdown
            # deadline (set_deadline) and the stall timeout bound it in time.
            async with self._lock:
                await self._guarded_write([data], self.stall_timeout, shield=True)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.debug("direct send failed: %s", exc)
            self.close_after_flush()

    async def wait_drained(self, below: int) -> None:
        """Wait until the backlog is under ``below`` bytes (reader back-pressure)."""
        while self._pending >= below and not self.closed:
            await self._drained.wait()

    async def run(self) -> None:
        """The writer task: send what is queued, in one write, until closed."""
        try:
            while not self.closed:
                await self._wake.wait()
                self._wake = anyio.Event()
                if self._chunks:
                    async with self._lock:
                        chunks, self._chunks = self._chunks, []
                        self._run_start = self._run_bytes = 0
                        stall = self._final_stall if self._closing else self.stall_timeout
                        if not await self._guarded_write(chunks, stall, shield=False):
                            break
                        self._pending -= sum(map(len, chunks))
                if not self._chunks:
                    self._drained.set()
                if self._closing and not self._chunks:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.debug("writer stopped: %s", exc)
        finally:
            self.closed = True
            self._closing = True  # closed implies closing: one flag for the producers to test
            self._drained.set()
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()


def _pieces(chunks: list[bytes]) -> Iterator[bytes]:
    """``chunks`` as sends of at most CHUNK bytes: small ones joined, a big one cut."""
    group: list[bytes] = []
    size = 0
    for chunk in chunks:
        if group and size + len(chunk) > CHUNK:
            yield group[0] if len(group) == 1 else b"".join(group)
            group, size = [], 0
        if len(chunk) > CHUNK:
            view = memoryview(chunk)
            for start in range(0, len(chunk), CHUNK):
                yield bytes(view[start : start + CHUNK])
        else:
            group.append(chunk)
            size += len(chunk)
    if group:
        yield group[0] if len(group) == 1 else b"".join(group)
