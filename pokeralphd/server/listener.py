"""The listening socket: our own (private folder, stale-socket cleanup, single owner) or
one handed over by systemd socket activation; and the peer-credential check.

Start-up with our own socket follows pueue: take an exclusive lock beside the socket
(so two daemons starting at once cannot both win), try to connect to an existing socket
(someone answers: refuse), otherwise remove the stale file and bind. The lock file names
the daemon that holds it; one still held after that daemon died is waited for, a few
seconds at most (:func:`pokeralphd.store.locks.take_pid_lock` says why).

The folder is ours or nothing: it must be a real folder of ours (made 0700), on a way
no other user can change, and a lock file or socket in it that is a link or belongs to
someone else was planted, so it is removed before we use the name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pokeralphd.store.locks import orphaned, take_pid_lock

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SD_LISTEN_FDS_START = 3


class ListenerError(Exception):
    """Raised when the daemon cannot take its socket; the message says what to do."""


@dataclass
class BoundSocket:
    sock: socket.socket
    path: Path | None
    activated: bool  # passed in by the service manager: never unlink it
    lock_fd: int | None = None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if not self.activated and self.path is not None:
            with contextlib.suppress(OSError):
                # Only remove the socket if it is still ours (not replaced by a successor).
                if self.path.exists():
                    self.path.unlink()
        if self.lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.lock_fd)
            self.lock_fd = None


def activated_socket() -> socket.socket | None:
    """The socket systemd passed (``LISTEN_FDS``/``LISTEN_PID``), if it is meant for us."""
    pid = os.environ.get("LISTEN_PID")
    fds = os.environ.get("LISTEN_FDS")
    if not pid or not fds:
        return None
    try:
        if int(pid) != os.getpid() or int(fds) < 1:
            return None
    except ValueError:
        return None
    names = os.environ.get("LISTEN_FDNAMES", "").split(":")
    # Prefer an fd named for us; otherwise the first one.
    index = next((i for i, n in enumerate(names) if n in ("pokeralphd", "pokeralphd.socket")), 0)
    fd = SD_LISTEN_FDS_START + index
    for var in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(var, None)  # children must not think the fds are theirs
    sock = socket.socket(fileno=fd)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise ListenerError(f"the activated fd {fd} is not a Unix stream socket")
    os.set_inheritable(fd, False)
    return sock


def _check_ancestors(folder: Path) -> None:
    """Refuse a socket folder whose way can be changed by another user.

    Every folder from ``/`` down to ``folder`` (its real path) must belong to us or to
    root, and one that others may write into must be sticky (like ``/tmp``): otherwise
    its owner, or anyone allowed to write there, could rename our folder away and put
    theirs, with their socket, in its place (the ``$TMPDIR/pokeralph-runtime-{uid}``
    fallback made by another user first is the case in point).
    """
    real = folder.resolve()
    for here in (real, *real.parents):
        info = os.stat(here)
        if info.st_uid not in (os.getuid(), 0):
            raise ListenerError(
                f"{here} belongs to uid {info.st_uid}, not to you: that user could put "
                "their own socket in pokeralphd's place; remove it, or set XDG_RUNTIME_DIR "
                "(or --socket) to a folder of yours"
            )
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise ListenerError(
                f"{here} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): "
                f"they could put their own socket in pokeralphd's place; `chmod go-w {here}` "
                "or choose another --socket"
            )


def _ensure_private_dir(folder: Path) -> None:
    """Create (0700, every missing level) or check the socket's folder: a real folder we
    own, made 0700, on a way nobody else can change."""
    folder = folder.absolute()
    missing = [level for level in (folder, *folder.parents) if not os.path.lexists(level)]
    # Check the way before making anything on it, and again once made (a level made
    # meanwhile by someone else is theirs, not ours).
    _check_ancestors(missing[-1].parent if missing else folder.parent)
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level, 0o700)
    _check_ancestors(folder.parent)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise ListenerError(f"{folder} exists and is not a directory")
    if info.st_uid != os.getuid():
        raise ListenerError(
            f"{folder} belongs to uid {info.st_uid}, not to you; choose another --socket"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)


def _remove_foreign(path: Path) -> None:
    """Remove ``path`` if it is a link or belongs to someone else.

    Such an entry was planted (while the folder was still open to others, or by root):
    a lock link would have our pid written through it, a socket link would send clients
    to an impostor. The folder is ours, so we may remove what is in it.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ListenerError(
                f"{path} was planted by uid {info.st_uid} and cannot be removed "
                f"({exc.strerror}); remove it by hand"
            ) from exc


def _open_lock(lock_path: Path) -> int:
    _remove_foreign(lock_path)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as exc:
        raise ListenerError(f"cannot open {lock_path}: {exc.strerror}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_nlink != 1:
        os.close(fd)
        raise ListenerError(f"{lock_path} is not a plain file of yours; remove it by hand")
    return fd


def _someone_listens(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        return exc.errno not in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)
    else:
        return True
    finally:
        probe.close()


def bind_socket(
    path: Path,
    backlog: int = 128,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> BoundSocket:
    """Bind ``path`` as our socket (mode 0600 in a 0700 folder), or raise ListenerError.
    Blocking (it may wait for a dead daemon's lock: see
    :func:`~pokeralphd.store.locks.take_pid_lock`, whose seams ``sleep`` and ``clock``
    are)."""
    if len(os.fsencode(path)) >= 104:
        raise ListenerError(f"socket path is too long for AF_UNIX ({len(str(path))} bytes): {path}")
    _ensure_private_dir(path.parent)
    lock_path = path.with_name(path.name + ".lock")
    lock_fd = _open_lock(lock_path)
    try:
        busy = take_pid_lock(lock_fd, sleep=sleep, clock=clock)
    except OSError as exc:
        os.close(lock_fd)
        raise ListenerError(f"cannot lock {lock_path}: {exc.strerror}") from exc
    if busy is not None:
        os.close(lock_fd)
        if busy.orphaned:
            raise ListenerError(orphaned(lock_path, busy.owner))
        named = f" (pid {busy.owner})" if busy.owner is not None else ""
        raise ListenerError(
            f"another pokeralphd{named} is already running on {path}; "
            "stop it with `pokeralphctl daemon stop` or choose another --socket"
        )
    try:
        _remove_foreign(path)  # never probe a planted socket: it would answer
        if path.exists() or path.is_symlink():
            if _someone_listens(path):
                raise ListenerError(
                    f"another pokeralphd is already running on {path}; "
                    "stop it with `pokeralphctl daemon stop` or choose another --socket"
                )
            path.unlink()  # stale socket from a dead daemon
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        sock.listen(backlog)
    except BaseException:
        os.close(lock_fd)
        raise
    return BoundSocket(sock, path, activated=False, lock_fd=lock_fd)


# macOS, <sys/un.h>: options of level SOL_LOCAL (0) on a connected Unix socket.
# LOCAL_PEERCRED (0x001) gives a ``struct xucred`` (u_int cr_version, uid_t cr_uid, short
# cr_ngroups, gid_t cr_groups[NGROUPS = 16]; what getpeereid(3) reads), LOCAL_PEERPID
# (0x002) the pid_t of the process that connected.
SOL_LOCAL = 0
LOCAL_PEERCRED = 0x001
LOCAL_PEERPID = 0x002
XUCRED = "IIh16I"  # struct xucred, natively aligned (76 bytes)
XUCRED_VERSION = 0


def peer_credentials(
    sock: socket.socket,
    platform: str = sys.platform,
    getsockopt: Callable[[int, int, int], bytes] | None = None,
) -> tuple[int | None, int | None]:
    """``(pid, uid)`` of the process at the other end of a Unix socket (None if unknown).

    Linux: ``SO_PEERCRED`` (a pid of 0, a peer in a pid namespace we cannot see, is
    unknown). macOS: ``LOCAL_PEERCRED`` for the uid and ``LOCAL_PEERPID`` for the pid.
    ``platform`` and ``getsockopt`` are the seams the tests use."""
    get = getsockopt or sock.getsockopt
    if platform.startswith("linux"):
        so_peercred = getattr(socket, "SO_PEERCRED", 17)
        raw = get(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        return (pid if pid > 0 else None), uid
    if platform == "darwin":
        raw = get(SOL_LOCAL, LOCAL_PEERCRED, struct.calcsize(XUCRED))
        version, uid = struct.unpack_from("II", raw)
        if version != XUCRED_VERSION:
            return None, None  # a layout we do not know: nobody is known
        raw_pid = get(SOL_LOCAL, LOCAL_PEERPID, struct.calcsize("i"))
        (pid,) = struct.unpack("i", raw_pid[: struct.calcsize("i")])
        return (pid if pid > 0 else None), uid
    return None, None  # pragma: no cover - elsewhere nobody can be identified
