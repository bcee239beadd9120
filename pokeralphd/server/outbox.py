"""A connection's outgoing queue: replies and events written by one writer task.

Producers never block: they append bytes and wake the writer, which sends everything
queued in one ``send``. Replies are throttled at the source (the reader waits while the
backlog is large); events are bounded, and a subscriber whose backlog overflows is told
and disconnected, so a client that stops reading costs nobody else anything.

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
    from anyio.abc import ByteStream

log = logging.getLogger(__name__)

CHUNK = 64 << 10  # a client must take this much within the stall timeout
OVERFLOW_GRACE = 1.0  # seconds a dropped (overflowed) subscriber gets for its notice


class Outbox:
    def __init__(
        self,
        stream: ByteStream,
        max_event_bytes: int = 8 << 20,
        stall_timeout: float = 30.0,
        label: str = "connection",
    ) -> None:
        self._stream = stream
        self._chunks: list[bytes] = []
        self._pending = 0
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

    def put(self, data: bytes) -> None:
        """Queue a reply (or several, already framed)."""
        if self._closing:  # (closed implies closing)
            return
        self._chunks.append(data)
        self._pending += len(data)
        self._drained = anyio.Event() if self._drained.is_set() else self._drained
        self._wake.set()

    def put_event(self, data: bytes) -> bool:
        """Queue an event without blocking; False when the backlog is full (or closing)."""
        if self._closing:  # (closed implies closing)
            return False
        pending = self._pending + len(data)
        if pending > self.max_event_bytes:
            return False
        chunks = self._chunks
        chunks.append(data)
        self._pending = pending
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
        self._chunks.append(data)
        self._pending += len(data)
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
        self._drained.set()
        self._wake.set()  # the writer closes the stream

    async def _write(self, payload: bytes, stall: float) -> bool:
        """Send ``payload`` whole; False if the peer took nothing for ``stall`` seconds."""
        send = self._stream.send
        if len(payload) <= CHUNK:
            with anyio.move_on_after(stall):
                await send(payload)
                return True
            return False
        view = memoryview(payload)
        for start in range(0, len(payload), CHUNK):
            with anyio.move_on_after(stall):
                await send(bytes(view[start : start + CHUNK]))
                continue
            return False
        return True

    async def _guarded_write(self, payload: bytes, stall: float, *, shield: bool) -> bool:
        """Write under the shutdown deadline; on a stall or the deadline, abort. True if sent."""
        ok = False
        with anyio.CancelScope(shield=shield, deadline=self._deadline) as scope:
            self._scopes.add(scope)
            try:
                ok = await self._write(payload, stall)
            finally:
                self._scopes.discard(scope)
        if not ok:
            why = (
                self._deadline_why
                if scope.cancelled_caught
                else f"the client read nothing for {stall:g} s"
            )
            self._abort(why, len(payload))
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
                await self._guarded_write(data, self.stall_timeout, shield=True)
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
                        payload = b"".join(chunks)
                        stall = self._final_stall if self._closing else self.stall_timeout
                        if not await self._guarded_write(payload, stall, shield=False):
                            break
                        self._pending -= len(payload)
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
