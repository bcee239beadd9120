"""``pokeralphctl prd show|set-name|set-description|import``: the repository's PRD."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean
from pokeralphctl.parsing import sub

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context
    from pokeralphctl.terminal import Terminal


def add_prd(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")

    p = sub(subs, "show", "show the PRD and its tasks")
    p.set_defaults(handler=show)

    p = sub(subs, "set-name", "rename the PRD")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=set_name)

    p = sub(subs, "set-description", "change the PRD's description")
    p.add_argument("description", metavar="TEXT")
    p.set_defaults(handler=set_description)

    p = sub(subs, "import", "replace the PRD with a JSON file (- reads stdin)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(handler=import_)


def show(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl prd show``."""
    result = ctx.call("prd.get", ctx.params())
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    prd = result["prd"]
    if prd is None:
        out.line(
            "no PRD yet: add a task with `pokeralphctl task add`, or `pokeralphctl prd import`"
        )
        return 0
    out.line(f"{out.style(clean(prd['name']), 'bold')}  (version {result['version']})")
    if prd.get("description"):
        out.line(clean(prd["description"], multiline=True))
    metadata = prd.get("metadata") or {}
    for key, value in metadata.items():
        if value is not None:
            out.line(out.style(clean(f"{key}: {value}"), "dim"))
    tasks = prd.get("tasks") or []
    out.line()
    if not tasks:
        out.line("no tasks")
        return 0
    ordered = sorted(tasks, key=lambda t: (t.get("priority", 0), t["id"]))
    rows = [
        [clean(t["id"]), out.status(t["status"]), t.get("priority"), clean(t["title"])]
        for t in ordered
    ]
    out.table(["id", "status", "priority", "title"], rows)
    return 0


def _update(ctx: Context, **fields: Any) -> int:
    result = ctx.call("prd.update", ctx.params(**fields))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        prd = result["prd"]
        ctx.out.line(f"PRD {clean(repr(prd['name']))} saved (version {result['version']})")
    return 0


def set_name(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl prd set-name``."""
    return _update(ctx, name=args.name)


def set_description(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl prd set-description``."""
    return _update(ctx, description=args.description)


def read_prd(term: Terminal, path: str) -> dict[str, Any]:
    """The PRD in ``path`` (``-``: stdin); an object, or ``{"prd": {...}}`` as prd.get gives."""
    try:
        if path == "-":
            text = term.stdin.read()
        else:
            with open(term.abspath(path), encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise CommandError(
            f"cannot read {path}: {exc.strerror or exc}", "check the path and permissions"
        ) from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError(
            f"{path} is not valid JSON: {exc}",
            "fix the file; `pokeralphctl prd show --json` shows the expected shape",
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("prd"), dict) and "tasks" not in data:
        data = data["prd"]
    if not isinstance(data, dict):
        raise CommandError(
            f"{path} must hold a JSON object (the PRD), not {type(data).__name__}",
            "`pokeralphctl prd show --json` shows the expected shape",
        )
    return data


def import_(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl prd import``."""
    return _update(ctx, prd=read_prd(ctx.term, args.file))
