"""Opening files under a repository's ``.pokeralph/`` without ever following a link.

An agent runs inside the repository and can write anything there, ``.pokeralph/``
included; so can whoever made the clone. A symbolic link planted anywhere on the way to
one of our files (``.pokeralph`` itself, ``battles/{task}``, ``logs``, the file) would
make the daemon read or write outside the repository. So every path with a
``.pokeralph`` component is *guarded*: the folder holding that component (the repository
root, which the user chose) is opened normally, and from there each folder is opened with
``O_DIRECTORY | O_NOFOLLOW`` relative to the previous one's fd (created with
``mkdir(dir_fd=...)`` when asked), and the file itself with ``O_NOFOLLOW``. Every folder
on the way must belong to us. A link, a non-folder where a folder belongs, a folder of
another user, a special file (FIFO, device) where a file belongs, or a file with more
than one hard link that we are about to write into, is refused with a
:class:`StorageError` naming the path; nothing is written anywhere.

Paths without a ``.pokeralph`` component (the user's own state and config folders) are
opened as before, following links: the user may well keep them in a dotfiles checkout.

Policy refusals raise :class:`StorageError`; ordinary failures (no such file, permission
denied, disk full) stay :class:`OSError` so callers can tell "missing" from "refused".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pokeralph_core.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator

FOLDER = ".pokeralph"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | _CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR
# What opening a link with O_NOFOLLOW reports: ELOOP on Linux and macOS, EMLINK on
# FreeBSD, ENOTDIR when O_DIRECTORY meets a link or a file.
_REFUSED_ERRNOS = {errno.ELOOP, errno.EMLINK, errno.ENOTDIR}


def link_refused(path: Path | str) -> StorageError:
    return StorageError(
        f"{path} is a symbolic link; pokeralph never reads or writes through links under "
        f"{FOLDER}/ (it could reach outside the repository); remove it",
        file=str(path),
        reason="symlink",
    )


def guarded(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """``(repository root, parts from .pokeralph down)`` for a guarded path, else None.

    The last ``.pokeralph`` component counts: ids and file names below it never take
    that name, while a repository may itself live under a folder called so.
    """
    parts = path.parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == FOLDER:
            below = parts[index:]
            if ".." in below:
                raise StorageError(f"{path}: '..' is not allowed under {FOLDER}/", file=str(path))
            return Path(*parts[:index]) if index else Path("."), below
    return None


def _refusal(
    exc: OSError, dir_fd: int, name: str, path: Path, want_dir: bool
) -> StorageError | None:
    """The precise refusal a failed no-follow open stands for (None: a plain OSError)."""
    if exc.errno not in _REFUSED_ERRNOS:
        return None
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return link_refused(path)
    if want_dir and not stat.S_ISDIR(info.st_mode):
        return StorageError(
            f"{path} is not a directory; pokeralph needs a real folder there; remove it",
            file=str(path),
            reason="not_a_directory",
        )
    return None


def _check_folder(fd: int, path: Path) -> None:
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        raise StorageError(
            f"{path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); pokeralph "
            "keeps its files only in folders you own; remove it or change its owner",
            file=str(path),
            reason="foreign_owner",
            uid=info.st_uid,
        )


def _walk(anchor: Path, parts: tuple[str, ...], create: bool) -> int:
    """An fd of ``anchor/parts...``, every part opened without following links."""
    fd = os.open(anchor, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    here = anchor
    try:
        for name in parts:
            here = here / name
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                refused = _refusal(exc, fd, name, here, want_dir=True)
                if refused is None:
                    raise
                raise refused from exc
            os.close(fd)
            fd = child
            _check_folder(fd, here)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_dir(path: Path, create: bool = False) -> int:
    """An fd (``O_DIRECTORY``, close-on-exec) of the folder ``path``; the caller closes it.

    Guarded paths are walked without following links (and created with ``create``);
    other paths are created with ``mkdir -p`` and opened normally.
    """
    split = guarded(path)
    if split is None:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    anchor, parts = split
    return _walk(anchor, parts, create)


@contextlib.contextmanager
def folder(path: Path, create: bool = False) -> Iterator[int]:
    """:func:`open_dir` as a context manager."""
    fd = open_dir(path, create)
    try:
        yield fd
    finally:
        os.close(fd)


def makedirs(path: Path) -> None:
    """``mkdir -p`` that never follows a link under ``.pokeralph/``."""
    os.close(open_dir(path, create=True))


def open_at(dir_fd: int, name: str, path: Path, flags: int, mode: int = 0o644) -> int:
    """Open ``name`` in ``dir_fd`` without following a link; only a regular file will do.

    ``O_NONBLOCK`` keeps a planted FIFO from hanging the open; it is cleared again on the
    regular file we return. A file we open for writing must have a single hard link, so
    a hard link to a file outside cannot be written through either.
    """
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        refused = _refusal(exc, dir_fd, name, path, want_dir=False)
        if refused is None:
            raise
        raise refused from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(
                f"{path} is not a regular file; remove it", file=str(path), reason="not_a_file"
            )
        if flags & _WRITE_FLAGS and info.st_nlink > 1:
            raise StorageError(
                f"{path} has {info.st_nlink} hard links; pokeralph never writes into a file "
                "shared with another path; remove it",
                file=str(path),
                reason="hard_link",
            )
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, flags: int, mode: int = 0o644, create_dirs: bool = False) -> int:
    """``os.open(path, flags, mode)`` that never follows a link under ``.pokeralph/``.

    Returns a close-on-exec fd the caller closes. ``create_dirs`` creates missing folders
    on the way (without following links). Unguarded paths open as they always did.
    """
    if guarded(path) is None:
        if create_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags | _CLOEXEC, mode)
    with folder(path.parent, create=create_dirs) as dir_fd:
        return open_at(dir_fd, path.name, path, flags, mode)


def read_bytes(path: Path) -> bytes:
    """The whole file, opened as :func:`open_file` does."""
    with os.fdopen(open_file(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def entry_kind(dir_fd: int, name: str) -> str | None:
    """``"file"``, ``"dir"``, ``"link"`` or ``"other"`` for ``name`` in ``dir_fd``; None if absent."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link"
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "other"


def is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file, reached without following links.

    A link there (or on the way) is refused, not reported as "no file".
    """
    if guarded(path) is None:
        return path.is_file()
    try:
        with folder(path.parent) as dir_fd:
            kind = entry_kind(dir_fd, path.name)
    except (FileNotFoundError, NotADirectoryError):
        return False
    if kind == "link":
        raise link_refused(path)
    return kind == "file"


def listdir(path: Path) -> list[str]:
    """The names in folder ``path`` (sorted; [] if it does not exist), without following links."""
    try:
        with folder(path) as fd:
            return sorted(os.listdir(fd))
    except FileNotFoundError:
        return []


@dataclass(frozen=True)
class Entry:
    """One entry met by :func:`walk`; ``dir_fd`` is valid only while the walk stands on it."""

    dir_fd: int
    name: str
    path: Path
    kind: str  # "file", "dir", "link" or "other"


def walk(path: Path, max_depth: int = 8) -> Generator[Entry, None, None]:
    """Every entry under folder ``path``, depth first, never entering a link.

    Folders deeper than ``max_depth`` below ``path`` are not entered (our layout is three
    deep; an agent's deeper tree must not make start-up crawl). Nothing if ``path`` is
    missing.
    """
    try:
        fd = open_dir(path)
    except FileNotFoundError:
        return
    try:
        yield from _walk_fd(fd, path, max_depth)
    finally:
        os.close(fd)


def _walk_fd(fd: int, path: Path, depth: int) -> Iterator[Entry]:
    with os.scandir(fd) as entries:
        found = list(entries)
    for item in found:
        if item.is_symlink():
            kind = "link"
        elif item.is_dir(follow_symlinks=False):
            kind = "dir"
        elif item.is_file(follow_symlinks=False):
            kind = "file"
        else:
            kind = "other"
        yield Entry(fd, item.name, path / item.name, kind)
        if kind == "dir" and depth > 0:
            try:
                child = os.open(item.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced meanwhile, or unreadable: nothing of ours to do there
            try:
                yield from _walk_fd(child, path / item.name, depth - 1)
            finally:
                os.close(child)
