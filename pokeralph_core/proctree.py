"""Ending a process tree: a process group, its descendants and any other processes
named, politely (SIGTERM), then after a grace period for good (SIGKILL). The daemon
ends its agents' trees with it (adding every process that carries a run's token:
:func:`pokeralphd.proc.end_tree`), the local agent a command past its timeout.

Loads psutil: import it only where a tree must end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from collections.abc import Iterable


def end_tree(pid: int, grace: float, also: Iterable[psutil.Process] = ()) -> None:
    """End ``pid``'s group and descendants, and ``also`` (blocking: run in a thread).

    Our own child (``pid``) is never waited for with ``waitpid`` here: the event loop's
    child watcher reaps it, and reaping it first would steal its exit status (asyncio
    then reports 255 and may fail the process's waiter). It is watched until it is gone
    or a zombie instead."""
    victims: dict[int, psutil.Process] = {}
    mine: psutil.Process | None = None
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        if root.ppid() == os.getpid():
            mine = root
        else:
            victims[pid] = root
        for child in root.children(recursive=True):
            victims[child.pid] = child
    for proc in also:
        if proc.pid != pid:
            victims[proc.pid] = proc
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGTERM)
    everyone = [*victims.values(), *([mine] if mine else [])]
    for proc in everyone:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    alive = wait_ended(everyone, grace)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    wait_ended(alive, 2)


def ended(proc: psutil.Process) -> bool:
    """Whether ``proc`` has exited. A zombie has: only its reaping is left, which for an
    orphan is init's, and an init that reaps late (or a container's that never does)
    must not hold up a cancel for the whole grace period."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return not psutil.pid_exists(proc.pid)


def wait_ended(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait at most ``timeout`` seconds until every one of ``procs`` has exited (without
    reaping: our own children are reaped by their owner); the ones still running."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        alive = [proc for proc in procs if not ended(proc)]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return alive
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
