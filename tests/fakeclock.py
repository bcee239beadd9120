"""A clock tests move by hand: ``sleep`` returns only when ``advance`` passes its time."""

from __future__ import annotations

import anyio


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self.sleeping = anyio.Event()  # set whenever someone starts sleeping

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        wake = anyio.Event()
        self._sleepers.append((self._now + max(0.0, seconds), wake))
        self.sleeping.set()
        try:
            await wake.wait()
        finally:
            self._sleepers = [(t, e) for t, e in self._sleepers if e is not wake]

    def advance(self, seconds: float) -> None:
        self._now += seconds
        for deadline, wake in self._sleepers:
            if deadline <= self._now:
                wake.set()
