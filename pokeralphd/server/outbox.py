"""A connection's outgoing queue: replies and events written by one writer task.

Producers never block: they append bytes and wake the writer, which sends everything
queued in one ``send``. Replies are throttled at the source (the reader waits while the
backlog is large); events are bounded, and a subscriber whose backlog overflows is told
and disconnected, so a client that stops reading costs nobody else anything.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from anyio.abc import ByteStream

log = logging.getLogger(__name__)


class Outbox:
    def __init__(self, stream: ByteStream, max_event_bytes: int = 8 << 20) -> None:
        self._stream = stream
        self._chunks: list[bytes] = []
        self._pending = 0
        self._wake = anyio.Event()
        self._drained = anyio.Event()
        self._drained.set()
        self._closing = False
        self.closed = False
        self.max_event_bytes = max_event_bytes
        self._lock = anyio.Lock()  # one sender at a time: the writer task or send_now

    @property
    def pending_bytes(self) -> int:
        return self._pending

    def put(self, data: bytes) -> None:
        """Queue a reply (or several, already framed)."""
        if self.closed or self._closing:
            return
        self._chunks.append(data)
        self._pending += len(data)
        self._drained = anyio.Event() if self._drained.is_set() else self._drained
        self._wake.set()

    def put_event(self, data: bytes) -> bool:
        """Queue an event without blocking; False when the backlog is full (or closing)."""
        if self.closed or self._closing:
            return False
        if self._pending + len(data) > self.max_event_bytes:
            return False
        chunks = self._chunks
        chunks.append(data)
        self._pending += len(data)
        if len(chunks) > 1:
            return True  # already queued: the writer is awake and _drained is clear
        if self._drained.is_set():
            self._drained = anyio.Event()
        self._wake.set()
        return True

    def put_last(self, data: bytes) -> None:
        """Queue a final message (the overflow notice) and close once it is flushed."""
        if self.closed or self._closing:
            return
        self._chunks.append(data)
        self._pending += len(data)
        self.close_after_flush()

    def close_after_flush(self) -> None:
        self._closing = True
        self._wake.set()

    async def send_now(self, data: bytes) -> None:
        """Send at once from the caller's task when nothing is queued (saves a task switch
        per reply on a request/response connection); else queue behind what is waiting."""
        if self._chunks or self._lock.locked() or self.closed or self._closing:
            self.put(data)
            return
        try:
            # Shielded: a reply already computed is delivered even if the reader is being
            # cancelled (daemon.shutdown answers before the daemon stops); bounded in time
            # so a peer that does not read cannot hold a shutdown up.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5) as scope:
                async with self._lock:
                    await self._stream.send(data)
            if scope.cancelled_caught:
                self.close_after_flush()
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
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                if self._chunks:
                    async with self._lock:
                        chunks, self._chunks = self._chunks, []
                        payload = b"".join(chunks)
                        if self._closing:
                            # A closing peer may have stopped reading: a moment, no more.
                            with anyio.move_on_after(1):
                                await self._stream.send(payload)
                        else:
                            await self._stream.send(payload)
                        self._pending -= len(payload)
                if not self._chunks:
                    self._drained.set()
                if self._closing and not self._chunks:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.debug("writer stopped: %s", exc)
        finally:
            self.closed = True
            self._drained.set()
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
