"""A token bucket per channel, on the daemon's clock: at most ``burst`` messages at once,
then one every ``interval`` seconds. What a channel cannot send yet waits in its outbox
and goes out folded into one digest (:func:`pokeralphd.notify.compose.digest`)."""

from __future__ import annotations


class TokenBucket:
    def __init__(self, burst: int, interval: float, now: float) -> None:
        self.burst = burst
        self.interval = interval
        self.tokens = float(burst)
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) / self.interval)
        self.stamp = max(self.stamp, now)

    def wait_time(self, now: float) -> float:
        """Seconds until a token is there (0: now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) * self.interval

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
