"""``pokeralphctl rules list|add|rm|test``: the approval rules that decide tool calls.

A rule names a tool (``Bash``, ``Read``, ``mcp__server__tool``, the local agent's
``run_in_terminal`` ...) and a regular expression searched in the tool's input written as
canonical JSON (sorted keys, no spaces): ``^\\{"command":"git status"\\}$`` matches that
one command. A ``deny`` rule wins over any ``allow`` rule; with no matching rule the
policy decides (a person, through the inbox). ``rules test TOOL INPUT-JSON`` shows which
rule would decide a call, and the canonical input it is matched against as a person is
shown it: its full length, its beginning and end with where it was cut, spaces counted
(``␠×N``) and invisible characters named (``<U+202E>``).

Rules go to the repository's ``.pokeralph/config.json`` (it must be trusted: see
``pokeralphctl trust``), or with ``--user`` to the user's config, for every repository.
"""

from __future__ import annotations

import json

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean
from pokeralphctl.parsing import sub

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from pokeralphctl.commands import Context


def add_rules(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")

    p = sub(subs, "list", "the rules in effect, in order, with their layer and usage")
    p.set_defaults(handler=list_)

    p = sub(subs, "add", "add a rule (to the repository's config; --user: to yours)")
    p.add_argument("decision", choices=("allow", "deny"), help="what the rule decides")
    p.add_argument("tool", metavar="TOOL", help="Bash, Read, mcp__server__tool, read_file ...")
    p.add_argument("pattern", metavar="PATTERN", help="regex searched in the input's JSON")
    p.add_argument("description", metavar="DESCRIPTION", help="what it allows or denies")
    p.add_argument("--user", action="store_true", help="in your config, for every repository")
    p.set_defaults(handler=add)

    p = sub(subs, "rm", "remove a rule by id (from every layer that has it)")
    p.add_argument("id", metavar="ID")
    p.set_defaults(handler=remove)

    p = sub(subs, "test", "which rule would decide a call, and why")
    p.add_argument("tool", metavar="TOOL")
    p.add_argument("input", metavar="INPUT-JSON", help='the tool input, like \'{"command":"ls"}\'')
    p.set_defaults(handler=test)


def _line(rule: dict[str, Any]) -> str:
    return (
        f"{clean(rule['id'])}  {clean(rule['decision'])}  {clean(rule['toolName'])}  "
        f"{clean(rule['paramPattern'])}  ({clean(rule['description'])}, {clean(rule['source'])})"
    )


def list_(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl rules list``."""
    result = ctx.call("rules.list", ctx.params())
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    rows = [
        [
            r["id"],
            out.style(r["decision"], "green" if r["decision"] == "allow" else "red"),
            r["toolName"],
            r["paramPattern"],
            r["source"],
            r["useCount"],
            r["lastUsedAt"],
            r["description"],
        ]
        for r in result["rules"]
    ]
    if rows:
        out.table(
            ["id", "decision", "tool", "pattern", "layer", "uses", "last used", "description"],
            rows,
        )
    else:
        out.line("no approval rules: every tool call is left to the policy")
    if result["ignoredRepoRules"]:
        out.note(
            f"{result['ignoredRepoRules']} rule(s) of the repository's config ignored: "
            f"{clean(result['trustMessage'] or 'not trusted')}",
            "yellow",
        )
    return 0


def add(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl rules add``."""
    result = ctx.call(
        "rules.add",
        ctx.params(
            toolName=args.tool,
            paramPattern=args.pattern,
            description=args.description,
            decision=args.decision,
            scope="user" if args.user else "repo",
        ),
    )
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line("added " + _line(result["rule"]))
    return 0


def remove(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl rules rm``."""
    result = ctx.call("rules.remove", ctx.params(id=args.id))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        for rule in result["removed"]:
            ctx.out.line("removed " + _line(rule))
    return 0


def test(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl rules test``."""
    try:
        tool_input = json.loads(args.input)
    except ValueError as exc:
        raise CommandError(
            f"INPUT-JSON is not JSON: {exc}",
            'quote it for the shell, like \'{"command":"git status"}\'',
            code="usage",
        ) from None
    result = ctx.call("rules.test", ctx.params(tool=args.tool, input=tool_input))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    decision = result["decision"]
    if decision is None:
        out.line(out.style("no rule", "dim") + f": {clean(result['reason'])}")
    else:
        out.line(out.style(decision, "green" if decision == "allow" else "red"))
        out.line("  by " + _line(result["rule"]))
        out.line(f"  {clean(result['reason'])}")
    length = result.get("inputLength")
    shown = result.get("inputView")
    if shown is None:  # a daemon from before inputView: the canonical input as it is
        out.line(out.style(f"  input as matched: {clean(result['canonicalInput'])}", "dim"))
        return 0
    out.line(f"  input as matched ({length:,} characters as JSON):")
    for line in str(shown).splitlines():
        out.line("    " + clean(line))
    return 0
