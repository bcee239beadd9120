"""A run's priority: ``nice`` steps below the daemon's (``runNice``), every process of it
from its first instant.

Lowering a run's process group once it runs is not enough: ``setpriority`` walks the
processes in the group, and a fork under way during the walk has copied its parent's
priority already but joins the group only after it, so the new process keeps the old
priority, and so does all it starts (a run that forks at once, ``sh -c`` or ``make``, left
processes at the daemon's priority in about half of the starts of a test that delays the
daemon 30 ms). So a run is either

- started through ``nice -n`` (one more exec, ~0.65 ms): every process inherits the
  priority the first one starts with; or
- held by its wrapper (bubblewrap's ``--info-fd`` and ``--block-fd``: :class:`Hold`)
  while its group is lowered, when it has one process that forks no more (bwrap, waiting
  on its child) and one that has not started the command yet: nothing is forking.

Either way, on Linux, the run's session's autogroup is lowered too (:func:`lower_priority`).
:class:`RunPriority` is one run's plan, for :func:`pokeralphd.proc.spawn`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Sequence

NICE = shutil.which("nice")
HOLD_WAIT = 10.0  # seconds a wrapper may take to make the run's first process
HOLD_TOLD_MAX = 1 << 16  # bytes of what it tells (bwrap: a few lines of JSON), at most


class RunPriority:
    """How one run is put ``nice`` steps below us: held (``holdable``: its wrapper can
    :class:`Hold` it) and lowered, or started through ``nice -n``. Nothing for ``nice`` 0."""

    __slots__ = ("_through_nice", "hold", "nice")

    def __init__(self, nice: int, *, holdable: bool) -> None:
        self.nice = nice
        self.hold = Hold() if nice and holdable else None
        self._through_nice = bool(nice and self.hold is None and NICE)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as it is to be started (behind ``nice -n``, unless held)."""
        if not self._through_nice:
            return list(argv)
        assert NICE is not None
        return [NICE, "-n", str(self.nice), "--", *argv]

    @property
    def child_fds(self) -> tuple[int, ...]:
        """The descriptors the run's first process is to keep (the hold's)."""
        return self.hold.child_ends if self.hold is not None else ()

    async def apply(self, pid: int) -> None:
        """Once the run's first process (``pid``, its group's leader) has started: lower
        what is not low already, then let a held command go on."""
        if self.hold is not None:
            self.hold.started()
            await self.hold.made()
        if self.nice:
            # nice -n adds to the priority it finds: lowered again, the run would be twice
            # as low. Its autogroup is left either way.
            lower_priority(pid, self.nice, group=not self._through_nice)
        if self.hold is not None:
            self.hold.release()

    def close(self) -> None:
        """The run did not start: let go of what was opened for it."""
        if self.hold is not None:
            self.hold.close()


class Hold:
    """Two pipes that hold a run's command until its priority is lowered (bubblewrap's
    ``--info-fd`` and ``--block-fd``: :data:`told` is written to and closed once bwrap has
    cloned the process that will run the command, which then waits to read :data:`wait`).
    See the module's docstring for why."""

    __slots__ = ("_release", "_tell_read", "told", "wait")

    def __init__(self) -> None:
        self._tell_read, self.told = os.pipe2(os.O_CLOEXEC)
        self.wait, self._release = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._tell_read, False)

    @property
    def child_ends(self) -> tuple[int, int]:
        return self.told, self.wait

    def started(self) -> None:
        """The child has its ends: close ours of them (a wrapper that dies now is then
        seen as the end of what it tells)."""
        self.told = _closed(self.told)
        self.wait = _closed(self.wait)

    async def made(self, limit: float = HOLD_WAIT) -> None:
        """Wait until the wrapper has made the run's first process and said so (it then
        closes its end), it has died, or ``limit`` seconds have passed."""
        told = 0
        with anyio.move_on_after(limit):
            while told < HOLD_TOLD_MAX:
                await anyio.wait_readable(self._tell_read)
                try:
                    chunk = os.read(self._tell_read, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                told += len(chunk)

    def release(self) -> None:
        """Let the held command run (or, if the wrapper is gone, just close)."""
        with contextlib.suppress(OSError):
            os.write(self._release, b"\n")
        self.close()

    def close(self) -> None:
        """Close every end still open (again: nothing more)."""
        self.started()
        self._tell_read = _closed(self._tell_read)
        self._release = _closed(self._release)


def _closed(fd: int) -> int:
    """Close ``fd`` unless it is closed already (-1); -1."""
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
    return -1


def lower_priority(pid: int, nice: int, *, group: bool = True) -> None:
    """Lower a new run's priority ``nice`` steps below ours: its process group (what is in
    it now, and so whatever they start later) and, on Linux, its session's autogroup. The
    scheduler shares the CPU between sessions there before processes (each run is a
    session of its own), so without it a hundred runs would each weigh as much as the
    whole daemon. Best effort: where the system refuses, the run goes on as it is.
    ``group`` False: the group started at that priority (``nice -n``), only the autogroup
    is left to lower."""
    target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice)
    if group:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PGRP, pid, target)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as autogroup:
            autogroup.write(str(target))
