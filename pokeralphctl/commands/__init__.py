"""The CLI's commands, one module per command group; ``pokeralphctl.cli`` only wires them.

Each module has ``add_<command>(parser)`` functions that fill in a subparser and set
``handler``; a handler is ``handler(ctx, args) -> exit code``. Modules are imported only
when their command runs, so the common paths stay on the standard library. This package
imports no argparse (:mod:`pokeralphctl.parsing` holds the parser helpers): ``status``
and ``ping`` run without it.
"""

from __future__ import annotations

from pokeralph_core.paths import socket_path
from pokeralphctl import codes
from pokeralphctl.client import Connection, RequestFailed

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from typing import Any

    from pokeralphctl.commands.stream import EventStream
    from pokeralphctl.output import Output
    from pokeralphctl.terminal import Terminal

#: Exit codes, documented in ``pokeralphctl --help``.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 2, 3, 4

#: How long one request may take before the CLI gives up (``battle cancel`` waits up to 60 s).
CALL_TIMEOUT = 120.0


class CommandError(Exception):
    """Raised by a command that cannot do what was asked; ``hint`` says what to do next."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        code: int | str = "failed",
        data: Any = None,
    ) -> None:
        self.message = message
        self.hint = hint
        self.code = code
        self.data = data
        super().__init__(message)


class Context:
    """What every handler needs: where the daemon is, which repository, how to print, and
    the terminal the command runs in (its environment, working directory and stdin)."""

    def __init__(self, term: Terminal, out: Output, repo: str | None, repo_given: bool) -> None:
        self.term = term
        self.out = out
        #: ``repo`` as sent to the daemon: a short name, or an absolute path (cwd by default).
        self.repo = repo
        #: whether ``--repo`` was given (else ``repo`` is the working directory)
        self.repo_given = repo_given

    def socket(self) -> str:
        """The daemon's socket, as this terminal's environment names it."""
        return socket_path(environ=self.term.env)

    def connect(self, timeout: float | None = CALL_TIMEOUT) -> Connection:
        return Connection(self.socket(), timeout=timeout, environ=self.term.env)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request on a fresh connection (cheap on a Unix socket)."""
        with self.connect() as conn:
            try:
                return conn.call(method, params)
            except RequestFailed as exc:
                if exc.code != codes.METHOD_NOT_FOUND:
                    raise
                raise RequestFailed(
                    exc.code, f"this pokeralphd does not know {method}", exc.data
                ) from exc

    def stream(self, **filters: Any) -> EventStream:
        """An event subscription (see :class:`~pokeralphctl.commands.stream.EventStream`)."""
        from pokeralphctl.commands.stream import EventStream

        return EventStream(self, **filters)

    def params(self, **fields: Any) -> dict[str, Any]:
        """Params with the repository and without the ``None`` fields."""
        out = {k: v for k, v in fields.items() if v is not None}
        if self.repo is not None:
            out["repo"] = self.repo
        return out


def repo_argument(term: Terminal, value: str) -> str:
    """A repository as the daemon resolves it: a name as is, a path made absolute."""
    if "/" in value or value in (".", "..") or value.startswith("~"):
        return term.abspath(value)
    return value
