"""``pokeralphd``: run the daemon in the foreground, as service managers expect."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import anyio

from pokeralph_core.userdirs import Paths
from pokeralphd import __version__
from pokeralphd.daemon import Daemon
from pokeralphd.logsetup import setup_logging
from pokeralphd.server.listener import ListenerError
from pokeralphd.server.notify import Notifier
from pokeralphd.settings import DaemonSettings

log = logging.getLogger("pokeralphd")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pokeralphd",
        description="Run the pokeralph daemon in the foreground. "
        "$POKERALPH_SOCKET, when set, wins over --socket.",
    )
    parser.add_argument(
        "--socket", help="socket path (default: $XDG_RUNTIME_DIR/pokeralph/pokeralphd.sock)"
    )
    parser.add_argument("--log-file", type=Path, help="also log to this file")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    for name, field in DaemonSettings.model_fields.items():
        if field.annotation is bool:
            continue
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            dest=name,
            type=float if field.annotation is float else int,
            metavar="N",
            help=f"{(field.description or '').split('. ')[0]} "
            f"(default {field.get_default(call_default_factory=True)})",
        )
    parser.add_argument("--debug-methods", action="store_true", help="enable debug.* (benchmarks)")
    parser.add_argument(
        "--no-web", dest="web", action="store_false", help="do not serve the web dashboard"
    )
    parser.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="run every battle unconfined (sandbox.mode auto warns, required refuses)",
    )
    parser.add_argument("--version", action="version", version=f"pokeralphd {__version__}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.log_file)
    overrides: dict[str, object] = {
        name: getattr(args, name)
        for name in DaemonSettings.model_fields
        if getattr(args, name, None) is not None
    }
    if args.debug_methods:
        overrides["debug_methods"] = True
    overrides["web"] = args.web
    overrides["sandbox"] = args.sandbox
    try:
        settings = DaemonSettings.model_validate(overrides)
    except ValueError as exc:
        print(f"pokeralphd: invalid option: {exc}", file=sys.stderr)
        return 2
    daemon = Daemon(Paths.resolve(args.socket), settings, Notifier.from_env(), own_process=True)
    try:
        anyio.run(daemon.run)
    except ListenerError as exc:
        print(f"pokeralphd: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
