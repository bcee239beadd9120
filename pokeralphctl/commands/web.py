"""``pokeralphctl web``: the dashboard's address, as a one-time login link (``--open``
opens it in the browser).

The link carries no secret: it is signed with the per-user secret the daemon keeps
beside its socket (see :mod:`pokeralph_core.weblink`), works once, within two minutes, and
leaves a session in the browser that opened it (until the daemon stops, 12 hours at
most). ``--open`` starts the browser on a private file that forwards to the link, never
on the link itself: a program's arguments are there for every local user to read.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from pokeralph_core.weblink import (
    LINK_TTL,
    info_path,
    login_query,
    opener_path,
    read_secret,
    token_path,
    write_opener,
)
from pokeralphctl.commands import CommandError

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_web(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--open",
        action="store_true",
        help="open it in the browser too (via a private page, not its command line)",
    )
    parser.set_defaults(handler=web)


def login_url(socket: str) -> str:
    """A fresh one-time login link to the dashboard of the daemon on ``socket``."""
    try:
        with open(info_path(socket), "rb") as file:
            info = json.load(file)
        url, instance = str(info["url"]), str(info["instance"])
        secret = read_secret(token_path(socket))
    except FileNotFoundError as exc:
        raise CommandError(
            "the daemon serves no dashboard (started with --no-web, or its port could not "
            "be bound: see the daemon's log)"
        ) from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"cannot read the dashboard's address: {exc}") from exc
    return f"{url}login?{login_query(secret, instance)}"


def web(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl web``."""
    ctx.call("daemon.ping")  # the files may be left from a daemon that is gone
    url = login_url(ctx.socket())
    opened = False
    if args.open:
        import webbrowser

        try:
            page = write_opener(opener_path(ctx.socket()), url)
        except OSError as exc:
            raise CommandError(f"cannot write the page that opens the dashboard: {exc}") from exc
        opened = webbrowser.open(page)
    out = ctx.out
    if out.json:
        out.ok({"url": url, "expires": int(time.time()) + LINK_TTL, "opened": opened})
        return 0
    out.line(url)
    note = "opened in your browser; " if opened else ""
    if args.open and not opened:
        note = "no browser could be started: open it yourself; "
    out.note(f"({note}the link works once, within {LINK_TTL // 60} minutes)")
    return 0
