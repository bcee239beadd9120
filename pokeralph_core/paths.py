"""Where the daemon's socket is, computed the same way by the daemon and every client.

Order: ``$POKERALPH_SOCKET``, then an explicit path, then ``pokeralph/pokeralphd.sock``
under the user runtime dir: ``$XDG_RUNTIME_DIR`` when it is a private directory we own
(what platformdirs' ``user_runtime_dir`` also accepts), else ``/run/user/{uid}`` under the
same check, else ``~/Library/Caches/TemporaryItems`` on macOS, else
``pokeralph-runtime-{uid}`` in the temp dir. Standard library only: this runs on every
client start.

That last name is predictable, so another user may have made it first. The path is
still the same for daemon and clients (they must meet), but it is never trusted: the
daemon refuses a socket folder on a way another user can change (a folder of theirs,
or one others may write into without the sticky bit) and removes a lock or socket in
its folder that is a link or not its own; the client refuses a socket file that is a
link or not the user's, and a peer whose uid is not the user's, before sending a byte.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from collections.abc import Mapping

SOCKET_ENV = "POKERALPH_SOCKET"
APP = "pokeralph"
SOCKET_NAME = "pokeralphd.sock"


def _private_dir(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )


def runtime_dir(environ: Mapping[str, str] | None = None) -> str:
    """The user's runtime dir (not created here), following the order in the module doc;
    ``environ`` is the environment to read (the process's by default).

    Plain strings, not pathlib: this runs on every client start (pathlib, tempfile and
    typing would cost more than the rest of the client).
    """
    environ = os.environ if environ is None else environ
    env = environ.get("XDG_RUNTIME_DIR", "").strip()
    if env and os.path.isabs(env) and _private_dir(env):
        return env
    if sys.platform == "darwin":
        home = environ.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, "Library", "Caches", "TemporaryItems")
    run_user = f"/run/user/{os.getuid()}"
    if _private_dir(run_user):
        return run_user
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"{APP}-runtime-{os.getuid()}")


def socket_path(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """The socket to use: ``$POKERALPH_SOCKET``, else ``explicit``, else the default;
    ``environ`` is the environment to read (the process's by default)."""
    env = (os.environ if environ is None else environ).get(SOCKET_ENV, "").strip()
    if env:
        return env
    if explicit:
        return os.fspath(explicit)
    return os.path.join(runtime_dir(environ), APP, SOCKET_NAME)
