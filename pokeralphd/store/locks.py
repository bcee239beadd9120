"""Locks between processes: a repository's owner, and one read-modify-write of a shared file.

:class:`RepoLock` gives a repository to one daemon: an ``flock`` on
``.pokeralph/daemon.lock``, held for as long as the daemon keeps the repository
registered and released by the kernel when the daemon dies, so a crashed daemon never
leaves a repository locked. The file holds the owner's pid for the error message. It is
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
import fcntl
import os
from typing import TYPE_CHECKING

from pokeralph_core import safefs
from pokeralphd.errors import RepoLocked, StorageError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class RepoLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`RepoLocked` naming the holder's pid."""
        if self._fd is not None:
            return
        try:
            fd = safefs.open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600, create_dirs=True)
        except OSError as exc:
            raise StorageError(
                f"cannot open {self.path}: {exc.strerror}", file=str(self.path)
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise RepoLocked(
                f"{self.path.parent.parent} is held by another pokeralphd (pid {holder or '?'}); "
                "unregister it there or stop that daemon",
                pid=int(holder) if holder.isdigit() else None,
                path=str(self.path.parent.parent),
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
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
