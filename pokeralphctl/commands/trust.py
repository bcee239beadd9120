"""``pokeralphctl trust [REPO]`` and ``untrust [REPO]``: whether a repository's own config
may decide what runs.

A repository's ``.pokeralph/config.json`` comes with the repository (a clone, a pull, an
agent's edit). Until the user read the file and trusted its content, it may only make
things stricter: its sensitive keys that would loosen (all of ``agent``, ``roles`` and
``feedbackCommands``, allow rules, a looser ``permissions.unmatched``, a higher cap or
bound, ``yolo``) wait, while those that only tighten (deny rules, a stricter
``unmatched``, a lower cap) apply; the daemon decides which is which
(``pokeralph_core.config.tightening``) and says so. The daemon records the trusted content's
hash in the user's config, and a changed file needs trust again. Changes made through the
daemon (``config set``) keep a trusted file trusted.
"""

from __future__ import annotations

from pokeralphctl.commands import repo_argument
from pokeralphctl.output import clean, dumps

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from pokeralphctl.commands import Context
    from pokeralphctl.output import Output

#: environment variable names whose values are not echoed back
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def add_trust(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Trust the repository's .pokeralph/config.json as it is now, so that what it sets "
        "applies even where it loosens your config (agent, roles, feedbackCommands, allow "
        "rules, higher caps and bounds...); until then only what tightens applies. Read the "
        "file first: it comes with the repository."
    )
    parser.add_argument(
        "target", nargs="?", metavar="REPO", help="name or path (default: --repo, else .)"
    )
    parser.add_argument(
        "--hash",
        metavar="SHA256",
        help="trust only if the file still has this hash (`config get --json` shows it)",
    )
    parser.set_defaults(handler=trust)


def add_untrust(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Stop trusting the repository's .pokeralph/config.json: what it sets that would "
        "loosen your config waits again (what only tightens keeps applying)."
    )
    parser.add_argument(
        "target", nargs="?", metavar="REPO", help="name or path (default: --repo, else .)"
    )
    parser.set_defaults(handler=untrust, hash=None)


def _params(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    target = repo_argument(ctx.term, args.target) if args.target else ctx.repo
    params: dict[str, Any] = {"repo": target} if target else {}
    if args.hash:
        params["hash"] = args.hash
    return params


def shown(key: str, value: Any) -> str:
    """A sensitive value as ``trust`` prints it; secret-looking variables are masked."""
    if key == "agent.env" and isinstance(value, dict):
        parts = []
        for name, var in value.items():
            secret = any(word in name.upper() for word in SECRET_WORDS)
            parts.append(f"{name}=" + (f"<{len(str(var))} characters>" if secret else str(var)))
        return ", ".join(parts) or "{}"
    return value if isinstance(value, str) else dumps(value)


def trust(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl trust``."""
    result = ctx.call("config.trust", _params(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    state = result["trust"]
    where = f"{clean(result['path'])}/.pokeralph/config.json"
    out.line(f"trusted {where} ({clean(state['hash'])[:19]}…)")
    values = result["sensitiveValues"]
    already = [k for k in state["sensitiveKeys"] if k not in values]
    if not values:
        out.line("nothing of it waited for trust: it sets no key that loosens your config")
    else:
        out.line("it may now set (these waited for trust):")
        for key, value in values.items():
            out.line(f"  {clean(key)}: {clean(shown(key, value))}")
    if already:
        out.line(f"applied before too (they only tighten): {clean(', '.join(already))}")
    if values:
        out.note("a change to the file needs `pokeralphctl trust` again", "dim")
    return 0


def untrust(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl untrust``."""
    result = ctx.call("config.untrust", _params(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    where = f"{clean(result['path'])}/.pokeralph/config.json"
    if not result["changed"]:
        out.line(f"{where} was not trusted")
    else:
        out.line(f"no longer trusted: {where}")
    ignored = result["trust"]["ignoredKeys"]
    if ignored:
        out.line(f"ignored from now on (they would loosen): {clean(', '.join(ignored))}")
    tight = result["trust"]["tighteningKeys"]
    if tight:
        out.line(f"still applied (they only tighten): {clean(', '.join(tight))}")
    return 0


def warn(out: Output, state: dict[str, Any] | None, repo: str | None = None) -> bool:
    """Tell the user (on stderr) what an untrusted repository layer leaves out (it would
    loosen their config), and what of it applies because it only tightens; whether it
    warned (something waits for trust)."""
    if not isinstance(state, dict) or state["trusted"]:
        return False
    where = f"repository {repo}: " if repo else ""
    tight = ", ".join(str(k) for k in state["tighteningKeys"])
    ignored = ", ".join(str(k) for k in state["ignoredKeys"])
    if not ignored:
        if tight:
            note = f"{where}.pokeralph/config.json is not trusted: {tight} applied"
            out.note(note + " (they only tighten)", "dim")
        return False
    changed = " (it changed since you trusted it)" if state["trustedHash"] else ""
    out.note(
        f"warning: {where}.pokeralph/config.json is not trusted{changed}: {ignored} ignored "
        "(they would loosen your config or choose what runs: the user's or default values "
        "apply)",
        "yellow",
    )
    if tight:
        out.note(f"applied all the same (they only tighten): {tight}", "dim")
    target = f" {repo}" if repo else ""
    out.note(f"read .pokeralph/config.json, then run `pokeralphctl trust{target}`", "dim")
    return True


def check(ctx: Context) -> None:
    """Warn before a battle when the repository's config is not trusted (best effort)."""
    from pokeralphctl.client import RequestFailed

    try:
        result = ctx.call("config.get", ctx.params())
    except RequestFailed:  # an older daemon, or a config it cannot read: the action says
        return
    warn(ctx.out, result.get("trust"))
