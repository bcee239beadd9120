"""One channel's outbox: rate-limited, retried with backoff, given up with an event.

Messages wait in a bounded queue (the oldest go first past :attr:`Limits.outbox`); the
channel's worker takes a token from its bucket (:mod:`.ratelimit`) for each message it
sends, and when it takes the last one, folds whatever waits into one message
(:func:`~pokeralphd.notify.compose.digest`). Each is sent up to
:attr:`Limits.attempts` times, ``backoff``, twice that, … seconds apart on the daemon's
clock, then gives up and calls ``on_failed`` (the service publishes ``notify_failed``).
A channel that is slow or down holds up only its own outbox.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from pokeralphd.notify.channel import SendFailed
from pokeralphd.notify.compose import digest
from pokeralphd.notify.ratelimit import TokenBucket

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralphd.notify.channel import Channel
    from pokeralphd.notify.compose import Message
    from pokeralphd.ports import Clock


@dataclass(frozen=True)
class Limits:
    """How much a person is told, how fast, and how hard the daemon tries."""

    window: float = 3.0  # seconds a battle's notices coalesce
    burst: int = 5  # messages a channel sends at once…
    interval: float = 12.0  # …then one per this many seconds (5 a minute)
    attempts: int = 4  # tries of one message
    backoff: float = 2.0  # seconds before the second try, doubled after each
    outbox: int = 32  # messages a channel holds while it may not send
    inbound: int = 256  # events waiting to be read (past that: dropped and counted)


class Outbox:
    def __init__(
        self,
        channel: Channel,
        clock: Clock,
        limits: Limits,
        base_url: Callable[[], str | None],
        on_failed: Callable[[Channel, Message, int, str], None],
    ) -> None:
        self.channel = channel
        self.clock = clock
        self.limits = limits
        self.base_url = base_url
        self.on_failed = on_failed
        self.bucket = TokenBucket(limits.burst, limits.interval, clock.monotonic())
        self.queue: deque[Message] = deque()
        self.dropped = 0
        self.sent = 0
        self._wake = anyio.Event()

    def put(self, message: Message) -> None:
        self.queue.append(message)
        while len(self.queue) > self.limits.outbox:
            self.queue.popleft()
            self.dropped += 1
        self._wake.set()

    async def run(self) -> None:
        while True:
            if not self.queue:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            wait = self.bucket.wait_time(self.clock.monotonic())
            if wait > 0:
                await self.clock.sleep(wait)
                continue
            self.bucket.take(self.clock.monotonic())
            if self.bucket.wait_time(self.clock.monotonic()) == 0:  # more tokens: one
                await self.deliver(self.queue.popleft())
                continue
            # the last token for a while: whatever waits goes out folded into one
            messages = list(self.queue)
            self.queue.clear()
            await self.deliver(digest(messages, self.base_url()))

    async def deliver(self, message: Message) -> bool:
        """Send with retries; False (and ``on_failed``) when it gave up."""
        reason = "not sent"
        attempt = 0
        for attempt in range(1, self.limits.attempts + 1):
            try:
                await self.channel.send(message)
            except SendFailed as exc:
                reason = exc.reason
                if not exc.retry or attempt == self.limits.attempts:
                    break
                await self.clock.sleep(self.limits.backoff * 2 ** (attempt - 1))
            else:
                self.sent += 1
                return True
        self.on_failed(self.channel, message, attempt, reason)
        return False

    async def send_now(self, message: Message) -> None:
        """One attempt, now, within the rate limit (``notify test``)."""
        now = self.clock.monotonic()
        if not self.bucket.take(now):
            wait = self.bucket.wait_time(now)
            raise SendFailed(f"rate-limited: try again in {wait:.0f}s", retry=False)
        await self.channel.send(message)
        self.sent += 1
