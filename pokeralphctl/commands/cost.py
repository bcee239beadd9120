"""``pokeralphctl cost``: what the agents cost, from the daemon's ledger.

Totals by day (default), repository, task, backend, model or phase; ``--since``/``--until`` bound
the days (UTC, inclusive), ``--repo`` keeps one repository, ``--json`` prints the result.
"""

from __future__ import annotations

from pokeralphctl.output import clean, money

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from pokeralphctl.commands import Context

GROUPS = ("day", "repo", "task", "backend", "model", "phase")


def add_cost(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", choices=GROUPS, default="day", help="group by (default: day)")
    parser.add_argument("--since", metavar="YYYY-MM-DD", help="first day counted (UTC)")
    parser.add_argument("--until", metavar="YYYY-MM-DD", help="last day counted (UTC)")
    parser.set_defaults(handler=cost)


def params_of(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {"by": args.by}
    if args.since:
        params["since"] = args.since
    if args.until:
        params["until"] = args.until
    if ctx.repo_given and ctx.repo:
        params["repo"] = ctx.repo
    return params


def tokens(counts: dict[str, Any]) -> str:
    """``12.3k in, 4.5k out`` (cache reads and writes when there are any)."""

    def short(n: Any) -> str:
        n = int(n or 0)
        return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)

    parts = [f"{short(counts.get('inputTokens'))} in", f"{short(counts.get('outputTokens'))} out"]
    if counts.get("cacheReadInputTokens"):
        parts.append(f"{short(counts['cacheReadInputTokens'])} cache read")
    if counts.get("cacheCreationInputTokens"):
        parts.append(f"{short(counts['cacheCreationInputTokens'])} cache write")
    return ", ".join(parts)


def cost(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl cost``."""
    result = ctx.call("cost.summary", params_of(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    groups = result["groups"]
    if not groups:
        out.line("nothing spent yet (in the days asked)")
        return 0
    rows = [
        [
            clean(g["key"]),
            money(g["costUsd"]),
            g["iterations"],
            tokens(g["tokens"]),
        ]
        for g in groups
    ]
    total = result["total"]
    rows.append(
        [
            out.style("total", "bold"),
            out.style(money(total["costUsd"]), "bold"),
            total["iterations"],
            tokens(total["tokens"]),
        ]
    )
    out.table([args.by, "cost", "iterations", "tokens"], rows)
    if result["skipped"]:
        out.line(
            out.style(
                f"{result['skipped']} ledger lines could not be read (see the daemon log)", "yellow"
            )
        )
    return 0
