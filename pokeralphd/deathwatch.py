"""The death watch: what ends an unconfined run's process group when the daemon dies.

A small shell, started once per daemon process (when it starts its first run), in a
session of its own, reads the process groups of the daemon's runs from a pipe whose write
end only the daemon holds: ``+GROUP`` when a run starts, ``-GROUP`` once its first process
has been reaped. When the pipe ends, the daemon is gone (a ``kill -9`` included: the
kernel closes its descriptors), and the shell kills every group still listed, then exits.
A daemon that stopped cleanly has ended its runs and listed none.

Why not ``setpriv --pdeathsig``: it costs an exec per run (0.9 ms, twice an iteration),
kills only the run's first process (what it started lived on until the next daemon's
sweep), and a run's priority could not be set without a second exec (``nice``: see
:mod:`pokeralphd.runpriority`). A run in bubblewrap needs neither: it dies with its
parent by itself (``--die-with-parent``) and its pid namespace with it.

A process that left its run's group (``setsid``) is not the watch's: the next daemon's
sweep of its owner's mark ends it (:meth:`pokeralphd.proc.ProcessOwner.sweep_orphans`).
If the watch itself is killed, the next run started or ended starts another with every
group still listed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import weakref

log = logging.getLogger(__name__)

# Reads +GROUP / -GROUP lines until its input ends, then kills the groups still listed.
# Its first line is what ps shows of it, and NAME its $0.
SCRIPT = """\
: pokeralphd death watch, it kills the runs of a daemon that died
groups=
while read -r line; do
  case "$line" in
    +*) groups="$groups ${line#+}" ;;
    -*) kept=; for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept $g"; done
        groups=$kept ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
"""
SHELL = "/bin/sh"
NAME = "pokeralphd-deathwatch"
PENDING_MAX = 1 << 20  # bytes waiting for a watch that does not read, at most
STARTS_MAX = 8  # watches started in one process's life, at most: then it gives up


class DeathWatch:
    """The daemon process's death watch (one per process: :data:`WATCH`)."""

    def __init__(self, shell: str = SHELL) -> None:
        self._shell = shell
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._process: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None
        self._pending = bytearray()
        self._failed = False  # no shell to start, or one that keeps dying: said once
        self._starts = 0
        _WATCHES.add(self)

    @property
    def pid(self) -> int | None:
        """The watch's pid, once started."""
        return self._process.pid if self._process is not None else None

    def watch(self, group: int) -> None:
        """Kill process group ``group`` if the daemon dies before :meth:`forget`."""
        with self._lock:
            self._groups.add(group)
            self._send(b"+%d\n" % group)

    def forget(self, group: int) -> None:
        """``group``'s first process has been reaped: its id may go to another group."""
        with self._lock:
            if group in self._groups:
                self._groups.discard(group)
                self._send(b"-%d\n" % group)

    def _send(self, line: bytes) -> None:
        if self._failed:
            return
        if self._fd is None or (self._process is not None and self._process.poll() is not None):
            self._start()  # the first time, or the watch was killed: list all again
            return
        self._pending += line
        self._flush()

    def _start(self) -> None:
        self._retire()
        if self._starts >= STARTS_MAX:
            self._failed = True
            log.warning(
                "the death watch died %d times: no more; a dead daemon's runs end at the"
                " next start",
                self._starts,
            )
            return
        self._starts += 1
        try:
            read, write = os.pipe2(os.O_CLOEXEC)
        except OSError as error:  # out of descriptors: the next line tries again
            log.warning("no death watch for now (%s)", error)
            return
        try:
            self._process = subprocess.Popen(
                [self._shell, "-c", SCRIPT, NAME],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={"PATH": os.defpath},  # none of the daemon's (a service manager's)
                start_new_session=True,  # outlives a kill of the daemon's group
            )
        except OSError as error:
            os.close(write)
            self._failed = True
            log.warning("no death watch (%s): a dead daemon's runs end at the next start", error)
            return
        finally:
            os.close(read)
        os.set_blocking(write, False)
        self._fd = write
        self._pending = bytearray(b"".join(b"+%d\n" % g for g in sorted(self._groups)))
        self._flush()

    def _flush(self) -> None:
        while self._pending and self._fd is not None:
            try:
                sent = os.write(self._fd, self._pending)
            except BlockingIOError:  # the watch is behind: the rest goes with the next line
                if len(self._pending) > PENDING_MAX:
                    log.warning("the death watch does not read: starting another")
                    self._start()
                return
            except OSError:  # killed (a broken pipe): the next line starts another
                self._retire()
                return
            del self._pending[:sent]

    def _retire(self) -> None:
        """Kill the watch (at the end of its input it would kill the groups listed) and
        drop the pipe; the groups stay listed for the next one."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(1)
        self._drop_pipe()

    def _drop_pipe(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _forked(self) -> None:
        """In a child forked from this process: the parent's watch is the parent's (its
        pipe's end is closed here, so the parent's end alone keeps it waiting)."""
        self._lock = threading.Lock()
        self._groups.clear()
        self._process = None
        self._pending = bytearray()
        self._drop_pipe()


def _after_fork() -> None:
    for watch in list(_WATCHES):
        watch._forked()


_WATCHES: weakref.WeakSet[DeathWatch] = weakref.WeakSet()
os.register_at_fork(after_in_child=_after_fork)
#: The death watch of this process.
WATCH = DeathWatch()
