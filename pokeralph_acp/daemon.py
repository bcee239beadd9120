"""The daemon as ``pokeralph-acp`` reaches it: found, started on demand, and a session's
repository found or registered.

The socket is found as ``pokeralphctl`` finds it (:func:`pokeralph_core.paths.socket_path`:
``$POKERALPH_SOCKET``, then the user runtime dir). When nothing answers, the daemon is
started detached exactly as ``pokeralphctl`` does (:mod:`pokeralphctl.autostart`: not when
a service manager unit is installed, nor with ``POKERALPH_NO_AUTOSTART=1``); what that
prints goes to stderr, never to stdout, which is the editor's channel.
"""

from __future__ import annotations

import os
import sys

from pokeralph_acp.wire import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from pokeralph_core.paths import socket_path
from pokeralphctl import codes
from pokeralphctl.client import Connection, DaemonNotRunning, RequestFailed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: How long one request to the daemon may take (``battle.pause`` waits for the agent).
CALL_TIMEOUT = 120.0


class _Args:
    """What :func:`pokeralphctl.autostart.allowed` reads of a command line."""

    command = "acp"
    no_autostart = False


class Daemon:
    """The user's daemon, on the socket ``environ`` names."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.path = socket_path(environ=environ)

    def connect(self, timeout: float | None = CALL_TIMEOUT) -> Connection:
        return Connection(self.path, timeout=timeout, environ=self.environ)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        with self.connect() as conn:
            return conn.call(method, params)

    def ensure(self) -> None:
        """Make sure a daemon answers, starting one if allowed; else :class:`RpcError`."""
        try:
            self.call("daemon.ping")
            return
        except DaemonNotRunning as exc:
            reason = str(exc)
        if not self._autostart():
            raise RpcError(
                INTERNAL_ERROR,
                f"{reason.splitlines()[0]} It could not be started from here: run "
                "`pokeralphctl daemon start` (or `systemctl --user start pokeralphd`).",
                {"socket": self.path},
            )

    def _autostart(self) -> bool:
        from pokeralphctl import autostart
        from pokeralphctl.commands import Context
        from pokeralphctl.output import Output
        from pokeralphctl.terminal import Terminal

        cwd = os.getcwd() if os.path.isdir(".") else None
        term = Terminal(self.environ, cwd, sys.stdin, sys.stderr, sys.stderr)
        ctx = Context(term, Output(stdout=sys.stderr, environ=self.environ), None, False)
        try:
            return autostart.allowed(ctx, _Args()) and autostart.start(ctx)
        except OSError as exc:  # no python to spawn, a state dir we cannot write
            sys.stderr.write(f"pokeralph-acp: could not start pokeralphd: {exc}\n")
            return False

    def repository(self, cwd: str) -> dict[str, Any]:
        """The registered repository holding ``cwd`` (its ``name`` and ``path``),
        registering its git root first if it is not registered yet."""
        if not os.path.isabs(cwd):
            raise RpcError(
                INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}", {"field": "cwd"}
            )
        if not os.path.isdir(cwd):
            raise RpcError(INVALID_PARAMS, f"cwd {cwd} is not a directory", {"field": "cwd"})
        try:
            summary: dict[str, Any] = self.call("repo.status", {"repo": cwd})
            return summary
        except RequestFailed as exc:
            if exc.code != codes.REPO_NOT_FOUND:
                raise
        try:
            summary = self.call("repo.register", {"path": git_root(cwd) or cwd})
        except RequestFailed as exc:
            if exc.code == codes.NOT_A_GIT_REPO:
                raise RpcError(
                    INVALID_PARAMS,
                    f"{cwd} is not in a git repository: pokeralph works on git repositories "
                    "(run `git init` there, or `pokeralphctl init --git-init`)",
                    {"field": "cwd", "path": cwd},
                ) from exc
            raise
        return summary


def git_root(path: str) -> str | None:
    """The nearest folder at or above ``path`` holding ``.git`` (a folder or a worktree's
    file), or None."""
    here = os.path.realpath(path)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
