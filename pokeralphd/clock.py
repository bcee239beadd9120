"""The system clock, behind :class:`pokeralphd.ports.Clock`, and waiting on a clock.

The daemon's own timeouts (an agent's run timeout and idle watchdog, a rate-limit pause)
read and sleep on a ``Clock`` passed in, so tests drive them with a clock they advance
by hand instead of waiting. Transport-level grace periods (a few seconds to flush a
reply) stay on anyio's clock: they protect the daemon, not a policy.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from pokeralphd.ports import Clock


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


async def wait_or_timeout(event: anyio.Event, clock: Clock, seconds: float) -> bool:
    """Wait for ``event`` at most ``seconds`` on ``clock``; True if it was set."""
    if event.is_set():
        return True
    async with anyio.create_task_group() as tg:

        async def alarm() -> None:
            await clock.sleep(max(0.0, seconds))
            tg.cancel_scope.cancel()

        async def wait() -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(alarm)
        tg.start_soon(wait)
    return event.is_set()
