"""``pokeralphd``: run the daemon in the foreground, as service managers expect."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import anyio

from pokeralphd import __version__
from pokeralphd.daemon import Daemon
from pokeralphd.logsetup import setup_logging
from pokeralphd.paths import Paths
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
    parser.add_argument(
        "--max-message", type=int, help="largest accepted message in bytes (default 1 MiB)"
    )
    parser.add_argument(
        "--max-concurrent-battles",
        type=int,
        help="battles running at once, daemon-wide (default 4)",
    )
    parser.add_argument(
        "--event-history", type=int, help="events kept for resuming (default 10000)"
    )
    parser.add_argument(
        "--max-subscriber-backlog",
        type=int,
        help="bytes queued for a slow subscriber (default 8 MiB)",
    )
    parser.add_argument("--debug-methods", action="store_true", help="enable debug.* (benchmarks)")
    parser.add_argument("--version", action="version", version=f"pokeralphd {__version__}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.log_file)
    overrides = {}
    if args.max_message is not None:
        overrides["maxMessage"] = args.max_message
    if args.debug_methods:
        overrides["debugMethods"] = True
    if args.event_history is not None:
        overrides["eventHistory"] = args.event_history
    if args.max_subscriber_backlog is not None:
        overrides["maxSubscriberBacklog"] = args.max_subscriber_backlog
    if args.max_concurrent_battles is not None:
        overrides["maxConcurrentBattles"] = args.max_concurrent_battles
    try:
        settings = DaemonSettings.model_validate(overrides)
    except ValueError as exc:
        print(f"pokeralphd: invalid option: {exc}", file=sys.stderr)
        return 2
    daemon = Daemon(Paths.resolve(args.socket), settings, Notifier.from_env())
    try:
        anyio.run(daemon.run)
    except ListenerError as exc:
        print(f"pokeralphd: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
