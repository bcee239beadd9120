"""The CLI's commands, one module per command group; ``pokeralphctl.cli`` only wires them.

Each module has ``add_<command>(parser)`` functions that fill in a subparser and set
``handler``; a handler is ``handler(ctx, args) -> exit code``. Modules are imported only
when their command runs, so the common paths stay on the standard library.
"""

from __future__ import annotations

import argparse
import os
import sys

from pokeralphctl import codes
from pokeralphctl.client import Connection, RequestFailed
from pokeralphctl.output import Output

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from pokeralphctl.commands.stream import EventStream

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
    """What every handler needs: where the daemon is, which repository, how to print."""

    def __init__(self, out: Output, repo: str | None, repo_given: bool) -> None:
        self.out = out
        #: ``repo`` as sent to the daemon: a short name, or an absolute path (cwd by default).
        self.repo = repo
        #: whether ``--repo`` was given (else ``repo`` is the working directory)
        self.repo_given = repo_given

    def connect(self, timeout: float | None = CALL_TIMEOUT) -> Connection:
        return Connection(None, timeout=timeout)

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


def repo_argument(value: str) -> str:
    """A repository as the daemon resolves it: a name as is, a path made absolute."""
    if "/" in value or value in (".", "..") or value.startswith("~"):
        return os.path.abspath(os.path.expanduser(value))
    return value


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error honours ``--json`` and exits with code 2."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if Parser.json_errors:
            Output(json_mode=True).error("usage", f"{self.prog}: {message}", None)
            raise SystemExit(EXIT_USAGE)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nsee `{self.prog} --help`\n")


_common: Parser | None = None


def common_options() -> Parser:
    """``--json``, ``--repo``, ``--socket``, ``-v`` for every subcommand (parsed anywhere).

    Their defaults are suppressed here so that a value given before the command is not
    overwritten by a subparser's default.
    """
    global _common
    if _common is None:
        parser = Parser(add_help=False)
        add_common(parser, argparse.SUPPRESS)
        _common = parser
    return _common


def add_common(parser: argparse.ArgumentParser, default: Any = None) -> None:
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--json",
        action="store_true",
        default=default if default is not None else False,
        help="print a JSON envelope (streams: one JSON object per line)",
    )
    group.add_argument(
        "--repo",
        metavar="NAME|PATH",
        default=default,
        help="repository to act on (default: the current directory)",
    )
    group.add_argument(
        "--socket",
        metavar="PATH",
        default=default,
        help="daemon socket (default: $POKERALPH_SOCKET, else the user runtime dir)",
    )
    group.add_argument(
        "--no-autostart",
        action="store_true",
        default=default if default is not None else False,
        help="do not start a daemon when none answers ($POKERALPH_NO_AUTOSTART=1)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default if default is not None else 0,
        help="show more (tool results, progress events)",
    )


def sub(subparsers: argparse._SubParsersAction[Any], name: str, help: str, **kw: Any) -> Parser:
    """A subcommand parser with the global options, described by its help line."""
    parser: Parser = subparsers.add_parser(
        name,
        help=help,
        description=kw.pop("description", help),
        parents=[common_options()],
        **kw,
    )
    return parser
