"""``pokeralphctl ping`` and ``pokeralphctl status``: is the daemon there, what is it doing."""

from __future__ import annotations

from pokeralphctl.output import clean, counts, money

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from pokeralphctl.commands import Context
    from pokeralphctl.output import Output


def add_ping(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=ping)


def add_status(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=status)


def ping(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl ping``."""
    with ctx.connect() as conn:
        result = conn.call("daemon.ping")
        path = conn.path
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line(f"{result} from pokeralphd on {path}")
    return 0


STATUS_CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("daemon.status", None),
    ("repo.list", None),
    ("config.trustList", None),
]


def fetch_status(ctx: Context) -> dict[str, Any]:
    """``daemon.status``, ``repo.list`` and ``config.trustList``, pipelined on one
    connection (one round trip, not three)."""
    from pokeralphctl.client import RequestFailed

    with ctx.connect() as conn:
        daemon, repos, trust = conn.call_many(STATUS_CALLS)
    for answer in (daemon, repos):
        if isinstance(answer, RequestFailed):
            raise answer
    # a daemon older than the trust gate does not know config.trustList
    trust = None if isinstance(trust, RequestFailed) else trust["repos"]
    return {"daemon": daemon, "repos": repos, "trust": trust}


def status(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl status``."""
    result = fetch_status(ctx)
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        print_status(ctx.out, result)
    return 0


def uptime(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def battle_summary(out: Output, battle: dict[str, Any] | None) -> str:
    """``running 001-x it 3/10 $0.12`` for a battle summary, or ``-``."""
    if not battle:
        return "-"
    iteration = battle["iteration"]
    limit = battle["maxIterations"]
    it = f"it {iteration}/{limit}" if limit else f"it {iteration}"
    parts = [out.status(battle["status"]), clean(battle["taskId"]), it]
    parts.append(money(battle["costUsd"]))
    if battle["pausedReason"]:
        parts.append(clean(f"({battle['pausedReason']})"))
    return " ".join(parts)


def print_status(out: Output, result: dict[str, Any]) -> None:
    daemon = result["daemon"]
    clients = daemon["clients"]
    out.line(
        f"{out.style('pokeralphd', 'bold')} {daemon['version']}: "
        f"pid {daemon['pid']}, up {uptime(daemon['uptime'])}, "
        f"{clients} client{'s' if clients != 1 else ''}, socket {daemon['socket']}"
    )
    sandbox = daemon.get("sandbox")
    if isinstance(sandbox, dict) and sandbox.get("warning"):
        out.line(out.style(clean(f"! sandbox: {sandbox['warning']}"), "yellow"))
    starts = daemon.get("starts")
    if isinstance(starts, dict) and starts.get("waiting"):
        # runs past the start gate's slots (pokeralphd --starting-runs): why an agent of a
        # battle shown running has printed nothing yet
        out.line(
            f"runs loading: {starts['starting']} of {starts['slots']} at once, "
            f"{starts['waiting']} waiting their turn to start"
        )
    spent = daemon.get("spendToday")
    if isinstance(spent, dict) and spent["iterations"]:
        out.line(f"today: {money(spent['costUsd'])} over {spent['iterations']} iterations")
    repos = result["repos"]
    if not repos:
        out.line("no repositories: register one with `pokeralphctl init [PATH]`")
        return
    rows = []
    for repo in repos:
        if repo["error"]:
            detail = out.style(clean(f"unavailable: {repo['error']}"), "red")
            name = out.style(clean(repo["name"]), "bold")
            rows.append([name, clean(repo["path"]), detail, "-"])
            continue
        rows.append(
            [
                out.style(clean(repo["name"]), "bold"),
                clean(repo["path"]),
                counts(repo.get("tasks")),
                battle_summary(out, repo.get("battle")),
            ]
        )
    out.table(["repo", "path", "tasks", "battle"], rows)
    for repo in repos:
        battle = repo.get("battle") or {}
        for warning in battle.get("warnings") or []:
            out.line(out.style(clean(f"! {repo['name']} {battle['taskId']}: {warning}"), "yellow"))
    for entry in result.get("trust") or []:
        state = entry.get("trust")
        if isinstance(state, dict) and state["ignoredKeys"]:
            repo = clean(entry["repo"])
            ignored = clean(", ".join(str(k) for k in state["ignoredKeys"]))
            out.line(
                out.style(f"{repo}: .pokeralph/config.json is not trusted", "yellow")
                + f": {ignored} ignored; read it, then `pokeralphctl trust {repo}`"
            )
