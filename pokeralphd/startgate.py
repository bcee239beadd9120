"""How many runs may be starting up, and battles landing, at once, daemon-wide
(:class:`StartGate`).

A run is *starting* from when its first process is started until it first prints
something (on stdout or stderr), ends, or :data:`SETTLE` seconds have passed, whichever
comes first: the time its program spends loading (an interpreter and its imports, Node
and a CLI's bundle, a sandbox and its bridge). Past the gate's slots, a run waits for
one to come free before its process is started, in the order they asked.

Why: starting is the costliest moment of a run. A hundred battles started together (a
``battle start --all`` in ten repositories) started a hundred sandboxes, bridges and
agents in the same second: seconds of CPU at once on two cores, with the daemon's event
loop waiting for a CPU behind them, so every streamed line and every request was late
(``bench_stream``: a line's p99 275 ms over the run, a ping's 64 ms). A few at a time,
the same starts take about as long in all, and the daemon's work does not queue behind
them. One run alone never waits.

A battle landing (merging back, removing its worktree: a handful of git processes) takes
a slot too, for as long as it lasts or the settle time (:meth:`StartGate.held`). A
hundred battles that end together, as they started, then land a few at a time: in
``bench_stream`` the lines late by over 100 ms as they ended went from ~110,000-125,000
to ~25,000-55,000, on a machine where the benchmark's own receivers share the two cores.

A first word is heard where the daemon reads the run's pipes from their descriptors
(:mod:`pokeralphd.childproc`, Linux). Where runs start asyncio's way, nothing tells
when a run has loaded, so its slot is given back as soon as it is started: the starts
are spread only by how long each takes to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

#: Seconds a run holds its slot at most when it prints nothing (a feedback loop quiet
#: while it builds, an agent waiting to be spoken to).
SETTLE = 2.0


def default_slots() -> int:
    """Twice the CPUs: the cores stay busy with starting runs, but not flooded."""
    return max(2, 2 * (os.cpu_count() or 1))


class Starting:
    """One run's slot, given back once (:meth:`done`, idempotent: its first word, its
    end, the settle timer and a failed start may each call it)."""

    __slots__ = ("_free", "_settle", "_timer")

    def __init__(self, free: anyio.Semaphore, settle: float) -> None:
        self._free: anyio.Semaphore | None = free
        self._settle = settle
        self._timer: asyncio.TimerHandle | None = None

    def settle(self) -> None:
        """From now, give the slot back after the gate's settle time at the latest (under
        asyncio)."""
        if self._free is not None:
            self._timer = asyncio.get_running_loop().call_later(self._settle, self.done)

    def done(self) -> None:
        free, self._free = self._free, None
        if free is None:
            return
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        free.release()


class StartGate:
    """At most ``slots`` runs starting at once (see the module's docstring)."""

    def __init__(self, slots: int, settle: float = SETTLE) -> None:
        if slots < 1:
            raise ValueError("a start gate needs at least one slot")
        self.slots = slots
        self.settle = settle
        self._free: anyio.Semaphore | None = None  # made in the event loop, on first use

    @property
    def starting(self) -> int:
        """Runs holding a slot now."""
        return 0 if self._free is None else self.slots - self._free.value

    @property
    def waiting(self) -> int:
        """Runs waiting for a slot."""
        return 0 if self._free is None else self._free.statistics().tasks_waiting

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """A slot for a burst of work done here (a battle landing: its merge back and
        worktree removal, a handful of git processes), given back when the block ends or
        after the settle time, whichever comes first."""
        slot = await self.enter()
        slot.settle()
        try:
            yield
        finally:
            slot.done()

    async def enter(self) -> Starting:
        """Wait for a slot (first come, first served; a cancelled wait takes none)."""
        if self._free is None:
            self._free = anyio.Semaphore(self.slots, fast_acquire=True)
        await self._free.acquire()
        return Starting(self._free, self.settle)
