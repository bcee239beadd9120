"""Exclusive ownership of a repository by one daemon: an ``flock`` on ``.pokeralph/daemon.lock``.

The lock is held for as long as the daemon keeps the repository registered and is
released by the kernel when the daemon dies, so a crashed daemon never leaves a
repository locked. The file holds the owner's pid for the error message. It is opened
without following links (see :mod:`pokeralphd.store.safefs`): a ``daemon.lock`` planted as
a link is refused, never written through.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import TYPE_CHECKING

from pokeralphd.errors import RepoLocked, StorageError
from pokeralphd.store import safefs

if TYPE_CHECKING:
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
