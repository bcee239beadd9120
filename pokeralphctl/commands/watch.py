"""``pokeralphctl watch``: print the daemon's events as they happen, until Ctrl-C.

Which repository: ``--all`` watches every one; ``--repo`` one; by default the one the
current directory is in, or every one when it is in none. The watch survives daemon
restarts (see :mod:`pokeralphctl.commands.stream`). Ctrl-C ends it with exit code 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphctl.commands.render import render

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_watch(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print events as they happen (with --json: one event per line), reconnecting "
        "when the daemon restarts. Ctrl-C stops it with exit code 0."
    )
    parser.add_argument("--all", action="store_true", help="every repository")
    parser.add_argument("--task", metavar="TASK", help="only events of this task")
    parser.add_argument(
        "--type",
        dest="types",
        action="append",
        metavar="TYPE",
        help="only events of this type (repeat, or comma-separate, for several)",
    )
    parser.add_argument(
        "--since",
        type=int,
        metavar="SEQ",
        help="first replay the events after this sequence number the daemon still has",
    )
    parser.set_defaults(handler=watch)


def split_types(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [t.strip() for v in values for t in v.split(",") if t.strip()] or None


def watch(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl watch``."""
    out = ctx.out
    stream = ctx.stream(
        repo=None if args.all else ctx.repo,
        task_id=args.task,
        types=split_types(args.types),
        since=args.since,
        all_if_unregistered=not args.all and not ctx.repo_given,
    )
    try:
        stream.open()
        if not out.json:
            what = f"repository {stream.repo}" if stream.repo else "every repository"
            out.note(f"watching {what}; Ctrl-C stops", "dim")
        for event in stream.events():
            if out.json:
                out.ndjson(event)
                continue
            for line in render(out, event):
                out.line(line)
            out.stdout.flush()
    except KeyboardInterrupt:
        return 0
    finally:
        stream.close()
    return 0
