"""``pokeralphctl notify test [CHANNEL]``: send one notification through the daemon.

The daemon sends it (``notify.test``) on the channel named (``desktop``, or a webhook's
``name``, else ``webhook1``, ``webhook2``… in the order of ``notify.webhooks``), or on
every configured one; one attempt each, within the channel's rate limit. The channels
are set in the user's config: ``pokeralphctl config set --user notify.desktop true``.
"""

from __future__ import annotations

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean
from pokeralphctl.parsing import sub

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_notify(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub(subs, "test", "send one test notification (every channel, or the one named)")
    p.add_argument("channel", nargs="?", metavar="CHANNEL", help="desktop, or a webhook's name")
    p.set_defaults(handler=test)


def test(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl notify test``."""
    params = {"channel": args.channel} if args.channel else {}
    result = ctx.call("notify.test", params)
    results = result["results"]
    failed = [r for r in results if not r["ok"]]
    if ctx.out.json:
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(results)} channels failed", data={"results": results}
            )
        ctx.out.ok(result)
        return 0
    for entry in results:
        state = ctx.out.style("sent", "green") if entry["ok"] else ctx.out.style("failed", "red")
        why = f": {clean(str(entry['error']))}" if entry["error"] else ""
        ctx.out.line(f"{clean(entry['channel'])} ({clean(entry['format'])}): {state}{why}")
    if failed:
        raise CommandError(f"{len(failed)} of {len(results)} channels failed")
    return 0
