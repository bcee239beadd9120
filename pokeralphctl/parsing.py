"""argparse helpers of the CLI: the parser class and the global options.

Apart from :mod:`pokeralphctl.commands` because argparse (with gettext and shutil, which
it loads to size its help) costs start-up time that ``status`` and ``ping`` skip: they
are parsed by :func:`pokeralphctl.cli.quick_args`.
"""

from __future__ import annotations

import argparse
import sys

from pokeralphctl.commands import EXIT_USAGE
from pokeralphctl.output import Output

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from _typeshed import SupportsWrite

    from pokeralphctl.terminal import Terminal

# argparse looks up a translation of each of its messages with gettext, and every lookup
# probes the locale folders on disk (and imports ``locale``). CPython ships no catalog for
# argparse, so the lookups only cost start-up time: skip them.
argparse._ = str  # type: ignore[attr-defined]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error honours ``--json`` and exits with code 2, and what it
    prints (help, version, usage errors) goes to the command's terminal.

    Both come from the class: argparse makes the subcommands' parsers itself, from the
    class it is given, so each command line gets a class of its own (:func:`parser_class`)
    and two command lines in one process never share them.
    """

    json_errors = False
    terminal: Terminal | None = None

    def error(self, message: str) -> NoReturn:
        term = self.terminal
        if self.json_errors:
            out = Output(json_mode=True, stdout=term.stdout if term else None)
            out.error("usage", f"{self.prog}: {message}", None)
            raise SystemExit(EXIT_USAGE)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nsee `{self.prog} --help`\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        term = self.terminal
        if term is not None:
            if file is None or file is sys.stderr:
                file = term.stderr
            elif file is sys.stdout:
                file = term.stdout
        super()._print_message(message, file)


def parser_class(term: Terminal, *, json_errors: bool) -> type[Parser]:
    """A :class:`Parser` class for one command line: its terminal and ``--json``."""
    return type("Parser", (Parser,), {"terminal": term, "json_errors": json_errors})


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
