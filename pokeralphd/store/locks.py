"""Locks between processes: a repository's owner, and one read-modify-write of a shared file.

:class:`RepoLock` gives a repository to one daemon: an ``flock`` on
``.pokeralph/daemon.lock``, held for as long as the daemon keeps the repository
registered and released by the kernel when the daemon dies, so a crashed daemon never
leaves a repository locked. The file holds the owner's pid, for the error message and
for :func:`take_pid_lock`: a lock still held after the daemon it names died is held by a
child of that daemon caught between its fork and its exec (it has a copy of each of the
daemon's descriptors until it closes them as it execs), and is waited for. It is
opened without following links (see :mod:`pokeralph_core.safefs`): a ``daemon.lock``
planted as a link is refused, never written through. So the files under ``.pokeralph/``
have one writing process, and a lock within it is enough for them.

:func:`file_lock` serialises read-modify-write of a file that more than one process may
write: the user's config layer, shared by every repository. Its daemon is its one writer,
but a second daemon of the same user (another socket, another runtime folder) or a
``pokeralph-agent`` of an older release writes it too; each takes an ``flock`` on a lock
file beside it (``config.json.lock``) for the read, the check of the version and the
write, so neither loses the other's update. A person editing the file by hand takes no
lock: their change is a new version the next write reads (never lost to a write that
read before it, unless the two land within that one write's few milliseconds).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from pokeralph_core import safefs
from pokeralph_core.proctree import ended
from pokeralphd.errors import RepoLocked, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

LOCK_GRACE = 5.0  # seconds a dead daemon's lock may stay held by a child of it, at most
LOCK_POLL = 0.02  # seconds between tries meanwhile


@dataclass(frozen=True, slots=True)
class Busy:
    """Why :func:`take_pid_lock` did not take a lock: ``owner`` (the pid the file names,
    None: none yet) runs, or, ``orphaned``, it ended and, the grace over, something it
    started still holds the lock (:func:`orphaned` says so)."""

    owner: int | None
    orphaned: bool = False


def take_pid_lock(
    fd: int,
    *,
    grace: float = LOCK_GRACE,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Busy | None:
    """Take an exclusive ``flock`` on ``fd`` (a file holding its owner's pid) and write
    our pid into it: None. Or, without waiting, :class:`Busy` if the process it names
    runs or it names none (one is starting); if that process has ended, wait for the
    lock, ``grace`` seconds at most. Blocking: not on an event loop that serves. ``sleep``
    and ``clock`` are the tests' seams. OSError for what ``flock`` refuses otherwise."""
    deadline: float | None = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        owner = lock_owner(fd)
        if owner is None or runs(owner):
            return Busy(owner)
        now = clock()
        if deadline is None:
            deadline = now + grace
        if now >= deadline:
            return Busy(owner, orphaned=True)
        sleep(LOCK_POLL)
    # at once: whoever tries meanwhile must read who holds it, not who held it
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return None


def lock_owner(fd: int) -> int | None:
    """The pid a lock file names (what its holder wrote), or None."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def runs(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return not ended(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def orphaned(lock_path: Path, owner: int | None) -> str:
    """What to say of a lock still held after the pokeralphd it names has ended."""
    return (
        f"{lock_path} is still locked though pid {owner}, the pokeralphd that locked it, "
        f"has ended: a process it started holds it; find it with `fuser -v {lock_path}` "
        "and end it"
    )


class RepoLock:
    def __init__(
        self,
        path: Path,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._fd: int | None = None
        self._sleep = sleep  # the tests' seams for take_pid_lock
        self._clock = clock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, grace: float = LOCK_GRACE) -> None:
        """Take the lock or raise :class:`RepoLocked` naming the holder's pid (waiting
        ``grace`` seconds at most for a dead daemon's lock: :func:`take_pid_lock`)."""
        if self._fd is not None:
            return
        try:
            fd = safefs.open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600, create_dirs=True)
        except OSError as exc:
            raise StorageError(
                f"cannot open {self.path}: {exc.strerror}", file=str(self.path)
            ) from exc
        try:
            busy = take_pid_lock(fd, grace=grace, sleep=self._sleep, clock=self._clock)
        except OSError as exc:
            os.close(fd)
            raise StorageError(
                f"cannot lock {self.path}: {exc.strerror}", file=str(self.path)
            ) from exc
        if busy is not None:
            os.close(fd)
            repo = self.path.parent.parent
            message = (
                orphaned(self.path, busy.owner)
                if busy.orphaned
                else f"{repo} is held by another pokeralphd (pid {busy.owner or '?'}); "
                "unregister it there or stop that daemon"
            )
            raise RepoLocked(message, pid=busy.owner, path=str(repo))
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def lock_path(path: Path) -> Path:
    """The lock file of ``path``, beside it: ``config.json`` -> ``config.json.lock``."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive ``flock`` of ``path``'s lock file (:func:`lock_path`), waiting
    for another process (or another thread's open of it) to let go.

    Blocking: call it from a worker thread. The lock file stays (removing it would let two
    processes lock two different files); the kernel releases the lock when its holder
    dies, so a crashed writer never leaves the file locked.
    """
    target = lock_path(path)
    try:
        fd = safefs.open_file(target, os.O_RDWR | os.O_CREAT, 0o600, create_dirs=True)
    except OSError as exc:
        raise StorageError(f"cannot open {target}: {exc.strerror}", file=str(target)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last fd of the open file releases its lock
