"""``pokeralphctl``: the command line. This module only wires parsers to command modules.

Start-up speed matters here: only the standard library and ``pokeralphctl.*`` are
imported, and only the selected command's module is imported and its parser filled in;
the other commands are registered as bare names with their help line. The commands
without options of their own (``status``, ``ping``) skip argparse altogether when only
global options come with them (:func:`quick_args`): argparse, with the gettext and shutil
it loads, was a fifth of ``pokeralphctl status``'s time.
"""

from __future__ import annotations

import os
import sys

from pokeralph_core.paths import SOCKET_ENV
from pokeralphctl import __version__
from pokeralphctl.client import DaemonNotRunning, RequestFailed
from pokeralphctl.commands import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    Context,
    repo_argument,
)
from pokeralphctl.output import Output, field_of, hint_for
from pokeralphctl.terminal import Terminal, WorkingDirectoryGone

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

    from pokeralphctl.parsing import Parser

#: command -> (module under pokeralphctl.commands, help line); the order of ``--help``.
COMMANDS: dict[str, tuple[str, str]] = {
    "status": ("status", "show the daemon and every repository, one line each"),
    "ping": ("status", "check that the daemon answers"),
    "repos": ("repos", "list the registered repositories"),
    "init": ("repos", "register a repository (the current directory by default)"),
    "unregister": ("repos", "forget a repository (its files stay)"),
    "task": ("task", "list, add, show, edit and remove tasks"),
    "prd": ("prd", "show, rename, describe or import the PRD"),
    "config": ("config", "get, set and unset configuration keys"),
    "trust": ("trust", "let the repository's .pokeralph/config.json set its sensitive keys"),
    "untrust": ("trust", "stop trusting the repository's .pokeralph/config.json"),
    "rules": ("rules", "list, add, remove and test the approval rules for agents' tool calls"),
    "battle": ("battle", "start, follow, control and inspect battles"),
    "cost": ("cost", "what the agents cost: by day, repository, task, backend, model or phase"),
    "approve": ("battle", "approve the iteration awaiting approval (= battle approve)"),
    "watch": ("watch", "print events as they happen"),
    "daemon": ("daemon", "start, stop and check pokeralphd"),
    "demo": ("demo", "run a whole battle on a sample repository with the bundled demo agent"),
    "plan": ("plan", "turn an idea into a PRD with the agent (asks you its questions)"),
    "inbox": ("inbox", "what waits for you across repositories; `inbox show ID`"),
    "answer": ("inbox", "answer an inbox item (prompts fit its schema; flags for scripts)"),
    "deliver": ("deliver", "put something in the inbox; --blocking waits for the answer"),
    "web": ("web", "print a one-time link to the web dashboard; --open opens it"),
    "notify": ("notify", "notifications: `notify test [CHANNEL]` sends one"),
    "tui": ("tui", "the terminal dashboard (needs the extra: pip install 'pokeralph[tui]')"),
    "service": ("service", "install pokeralphd as a systemd user service or a launchd agent"),
    "completion": ("completion", "print shell completion for bash, zsh or fish"),
}

EPILOG = """\
exit codes:
  0  success
  1  the daemon refused the request, or the command could not do it
  2  usage error
  3  the daemon is not running: start it with `pokeralphctl daemon start`
     (or `systemctl --user start pokeralphd`)
  4  interrupted (Ctrl-C); `watch` exits 0 when interrupted

--json prints one envelope on stdout: {"ok": true, "result": ...} or
{"ok": false, "error": {"code": ..., "message": ..., "data": ...}}, where code is the
daemon's JSON-RPC error code, or daemon_not_running, connection_lost, usage,
interrupted, failed or internal. Streams (watch, --follow) print one object per line.

environment:
  POKERALPH_SOCKET  the daemon socket (--socket wins over it)
  POKERALPH_NO_AUTOSTART=1  never start a daemon on demand (--no-autostart)
  NO_COLOR          no colours, even on a terminal
"""

_VALUED = ("--socket", "--repo")

#: Commands that take no options of their own: command -> (module, handler). Parsed by
#: :func:`quick_args` when only global options come with them.
QUICK: dict[str, tuple[str, str]] = {"status": ("status", "status"), "ping": ("status", "ping")}
_FLAGS = {"--json": "json", "--no-autostart": "no_autostart"}


class QuickArgs:
    """What argparse makes of a quick command line: the same attributes, the same values."""

    def __init__(self, command: str, handler: Any) -> None:
        self.command = command
        self.handler = handler
        self.json = False
        self.no_autostart = False
        self.repo: str | None = None
        self.socket: str | None = None
        self.verbose = 0


def quick_args(argv: Sequence[str]) -> QuickArgs | None:
    """The parsed command line of a :data:`QUICK` command with global options only, as
    argparse would parse it; None for anything else (argparse then parses it, and says
    what is wrong). Only exact option names are taken (argparse would also take
    ``--opt=value`` forms, abbreviations after the command, ``-vv``): anything unusual
    goes to argparse.
    """
    command: str | None = None
    flags: set[str] = set()
    values: dict[str, str] = {}
    verbose = [0, 0]  # before and after the command: the subcommand's count replaces
    i, n = 0, len(argv)
    while i < n:
        arg = argv[i]
        i += 1
        if arg in _FLAGS:
            flags.add(_FLAGS[arg])
        elif arg in _VALUED:
            if i >= n or argv[i].startswith("-"):
                return None
            values[arg[2:]] = argv[i]  # the last one given wins, as with argparse
            i += 1
        elif arg == "-v" or arg == "--verbose":
            verbose[command is not None] += 1
        elif command is None and arg in QUICK:
            command = arg
        else:
            return None  # another command, --help, --version, an unknown option, "--"
    if command is None:
        return None
    module_name, handler_name = QUICK[command]
    module = __import__(f"pokeralphctl.commands.{module_name}", fromlist=[handler_name])
    args = QuickArgs(command, getattr(module, handler_name))
    args.json = "json" in flags
    args.no_autostart = "no_autostart" in flags
    args.repo = values.get("repo")
    args.socket = values.get("socket")
    args.verbose = verbose[1] or verbose[0]
    return args


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (skipping global options and their values)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg in _VALUED:
            i += 2
            continue
        if not arg.startswith("-"):
            return arg
        i += 1
    return None


def build_parser(
    argv: Sequence[str], term: Terminal | None = None
) -> tuple[Parser, dict[str, Parser]]:
    """The parser, with only the command named in ``argv`` (each parser costs start-up time).

    Without a known command every command is listed, as bare names with their help line.
    What the parsers print goes to ``term`` (this process's streams by default), and a
    usage error is a ``--json`` envelope when ``argv`` asks for one.
    """
    import argparse
    import importlib

    from pokeralphctl.parsing import add_common, common_options, parser_class

    per_call = parser_class(term or Terminal.of_process(), json_errors="--json" in argv)
    parser = per_call(
        prog="pokeralphctl",
        description="Control pokeralphd, the daemon that runs AI coding agents in loops.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"pokeralphctl {__version__}")
    add_common(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=per_call)
    chosen = command_of(argv)
    built: dict[str, Parser] = {}
    for name, (module_name, help_line) in COMMANDS.items():
        if name == chosen:
            sub = subparsers.add_parser(
                name, help=help_line, description=help_line, parents=[common_options()]
            )
            module = importlib.import_module(f"pokeralphctl.commands.{module_name}")
            getattr(module, f"add_{name}")(sub)
            built[name] = sub
        elif chosen not in COMMANDS:
            # no command, or an unknown one: list them all (for --help and the error)
            subparsers.add_parser(name, help=help_line, add_help=False)
    return parser, built


def _repo(term: Terminal, args: argparse.Namespace | QuickArgs) -> tuple[str | None, bool]:
    if args.repo:
        return repo_argument(term, args.repo), True
    return term.cwd, False  # None when the working directory was deleted


def main(argv: Sequence[str] | None = None, term: Terminal | None = None) -> int:
    """Run one command line; ``term`` is what it runs in (this process's environment,
    working directory and standard streams by default)."""
    term = term or Terminal.of_process()
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | QuickArgs | None = quick_args(argv)
    if args is None:
        parser, built = build_parser(argv, term)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version, usage errors
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if getattr(args, "handler", None) is None:
            shown = built.get(args.command) if args.command else None
            (shown or parser).print_help(term.stderr)
            return EXIT_USAGE
    out = Output(
        json_mode=args.json,
        stdout=term.stdout,
        stderr=term.stderr,
        verbose=args.verbose,
        environ=term.env,
    )
    socket = args.socket or term.env.get(SOCKET_ENV, "").strip()
    try:
        if args.socket or (socket and not os.path.isabs(socket)):
            # $POKERALPH_SOCKET wins in pokeralph_core.paths; --socket must win over it here,
            # and a daemon started by `daemon start` inherits it; either is made absolute
            # against the terminal's directory (not the process's).
            term = term.with_env(**{SOCKET_ENV: term.abspath(socket)})
        repo, given = _repo(term, args)
    except WorkingDirectoryGone as exc:
        return _gone(out, exc)
    return run(args.handler, Context(term, out, repo, given), args)


def _gone(out: Output, exc: WorkingDirectoryGone) -> int:
    out.error(
        "usage",
        str(exc),
        {"path": exc.path},
        "cd to a folder that exists, or give the path in full",
    )
    return EXIT_USAGE


def run(
    handler: Any, ctx: Context, args: argparse.Namespace | QuickArgs, retried: bool = False
) -> int:
    """Run a handler; every failure becomes one message with what to do next."""
    out = ctx.out
    try:
        code = int(handler(ctx, args))
        ctx.term.stdout.flush()
        return code
    except DaemonNotRunning as exc:
        from pokeralphctl import autostart

        if not retried and autostart.allowed(ctx, args) and autostart.start(ctx):
            return run(handler, ctx, args, retried=True)
        out.error("daemon_not_running", str(exc), {"socket": str(exc.path)})
        return EXIT_NOT_RUNNING
    except RequestFailed as exc:
        message = exc.message
        field = field_of(exc.data)
        if field and field not in message:
            message = f"{message} (field: {field})"
        out.error(exc.code, message, exc.data, hint_for(exc.code, exc.data))
        return EXIT_FAILED
    except CommandError as exc:
        out.error(exc.code, exc.message, exc.data, exc.hint)
        return EXIT_USAGE if exc.code == "usage" else EXIT_FAILED
    except WorkingDirectoryGone as exc:
        return _gone(out, exc)
    except KeyboardInterrupt:
        out.error("interrupted", "interrupted", None)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout went away (`pokeralphctl task list | head -1`): stop quietly (and keep
        # Python from failing again when it flushes stdout at exit).
        if ctx.term.stdout is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except (ConnectionError, TimeoutError) as exc:
        out.error(
            "connection_lost",
            f"lost the connection to pokeralphd: {exc}",
            None,
            "check it with `pokeralphctl daemon status`; its log says what happened",
        )
        return EXIT_FAILED
    except Exception as exc:
        if out.verbose:
            import traceback

            traceback.print_exc(file=ctx.term.stderr)
        out.error(
            "internal",
            f"unexpected error: {type(exc).__name__}: {exc}",
            None,
            "this is a bug in pokeralphctl: please report it with the command you ran "
            "(-v shows the traceback)",
        )
        return EXIT_FAILED
