"""Durable, atomic file writes: temp file in the same folder, fsync, rename, fsync folder.

A reader sees the old file or the new one, never half of either; a crash or a full disk
leaves the old file in place. Under ``.pokeralph/`` nothing is reached through a link
(see :mod:`pokeralph_core.safefs`): the folder is walked without following links, the
temp file has an unpredictable name and is created with ``O_EXCL | O_NOFOLLOW``, and
the rename happens within that one folder fd.

A write killed half-way (``kill -9``) leaves its temp file behind;
:func:`remove_stale_temp_files` clears them at the next start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from typing import TYPE_CHECKING

from pokeralph_core import safefs
from pokeralph_core.errors import StorageError

if TYPE_CHECKING:
    from pathlib import Path

# ``.{name}.{pid}.{16 hex}.tmp`` (and ``.{name}.{pid}.tmp``, the predictable shape older
# versions wrote, still cleared at start).
TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)(?:\.[0-9a-f]{16})?\.tmp$")


def temp_name(name: str) -> str:
    """A fresh, unguessable temp name for ``name`` in the same folder."""
    return f".{name}.{os.getpid()}.{os.urandom(8).hex()}.tmp"


def _describe(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device holding {path}; free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied writing {path}; check the folder's owner and mode"
    if exc.errno == errno.EROFS:
        return f"{path} is on a read-only file system"
    return f"could not write {path}: {exc.strerror or exc}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Raises :class:`StorageError` (naming the file and the cause) when the write fails or
    a link stands in the way under ``.pokeralph/``; the previous content of ``path`` is
    then untouched, and nothing is written anywhere else.
    """
    try:
        dir_fd = safefs.open_dir(path.parent, create=True)
    except OSError as exc:
        raise StorageError(_describe(exc, path.parent), file=str(path), errno=exc.errno) from exc
    tmp: str | None = None
    try:
        if safefs.guarded(path) is not None and safefs.entry_kind(dir_fd, path.name) == "link":
            raise safefs.link_refused(path)
        tmp = temp_name(path.name)
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
            mode,
            dir_fd=dir_fd,
        )
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
        os.fsync(dir_fd)
    except OSError as exc:
        raise StorageError(_describe(exc, path), file=str(path), errno=exc.errno) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
        os.close(dir_fd)


def append_bytes(path: Path, data: bytes) -> None:
    """Append to a log file (not atomic: logs are append-only and read tolerantly)."""
    try:
        fd = safefs.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, create_dirs=True)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(_describe(exc, path), file=str(path), errno=exc.errno) from exc


def _stale(pid: int, exclusive: bool) -> bool:
    if pid == os.getpid():
        return False  # a write of ours may be under way
    if exclusive:
        return True  # the caller holds the folder's lock: no one else writes there
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except OSError:
        return False  # alive, someone else's
    return False


def remove_stale_temp_files(
    folder: Path, *, recursive: bool = False, exclusive: bool = False
) -> list[Path]:
    """Remove temp files that writes killed half-way left in ``folder``; return them.

    Only names of our pattern (``.{name}.{pid}[.{random}].tmp``) go, never through a
    link (a link of that name is removed itself). With ``exclusive`` (the caller holds
    the lock of the folder, as the daemon does for ``.pokeralph/``) every such file not of
    this process is stale; otherwise only those whose process is gone. ``recursive``
    walks sub-folders, never entering a link.
    """
    return sweep(folder, recursive=recursive, exclusive=exclusive)[0]


def sweep(
    folder: Path, *, recursive: bool = False, exclusive: bool = False
) -> tuple[list[Path], Path | None]:
    """:func:`remove_stale_temp_files`, and the first link left in ``folder`` after that
    (never entered), in one walk: the daemon checks every repository's ``.pokeralph/`` so
    at each start."""
    removed: list[Path] = []
    link: Path | None = None
    for entry in safefs.walk(folder, max_depth=8 if recursive else 0):
        if entry.kind not in ("file", "link"):
            continue
        match = TEMP_RE.match(entry.name)
        if match is not None and _stale(int(match["pid"]), exclusive):
            try:
                os.unlink(entry.name, dir_fd=entry.dir_fd)
            except OSError:
                pass  # gone already, or not ours to remove: harmless either way
            else:
                removed.append(entry.path)
                continue
        if entry.kind == "link" and link is None:
            link = entry.path
    return removed, link
