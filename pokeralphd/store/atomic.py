"""Durable, atomic file writes: temp file in the same folder, fsync, rename, fsync folder.

A reader sees the old file or the new one, never half of either; a crash or a full disk
leaves the old file in place and no stray temp file behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import TYPE_CHECKING

from pokeralphd.errors import StorageError

if TYPE_CHECKING:
    from pathlib import Path


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _describe(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device holding {path}; free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied writing {path}; check the folder's owner and mode"
    if exc.errno == errno.EROFS:
        return f"{path} is on a read-only file system"
    return f"could not write {path}: {exc.strerror or exc}"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Raises :class:`StorageError` (naming the file and the cause) when the write fails;
    the previous content of ``path`` is then untouched.
    """
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(_describe(exc, folder), file=str(path), errno=exc.errno) from exc
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StorageError(_describe(exc, path), file=str(path), errno=exc.errno) from exc


def append_bytes(path: Path, data: bytes) -> None:
    """Append to a log file (not atomic: logs are append-only and read tolerantly)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle:
            handle.write(data)
    except OSError as exc:
        raise StorageError(_describe(exc, path), file=str(path), errno=exc.errno) from exc
