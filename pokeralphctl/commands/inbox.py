"""``pokeralphctl inbox``, ``inbox show ID``, ``answer ID``: what waits for a person.

``answer`` asks at the terminal in a way that fits the delivery's schema (yes/no, a
choice, each form field, a rating), or takes the values as flags for scripts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_inbox(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    parser.add_argument("id", nargs="?", help="delivery id (for show)")
    parser.add_argument("--all", action="store_true", help="answered and passive items too")
    parser.set_defaults(handler=inbox)


def add_answer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="delivery id (see `pokeralphctl inbox`)")
    parser.add_argument("--yes", action="store_true", help="confirm")
    parser.add_argument("--no", action="store_true", help="decline")
    parser.add_argument("--value", action="append", help="an option to choose (repeat for several)")
    parser.add_argument(
        "--field", action="append", metavar="NAME=VALUE", help="a form field (repeat)"
    )
    parser.add_argument("--rating", type=int)
    parser.add_argument("--note", help="free text sent with the answer")
    parser.set_defaults(handler=answer)


def inbox(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl inbox``."""
    out = ctx.out
    if args.action == "show":
        if not args.id:
            raise CommandError("inbox show needs an id", "see `pokeralphctl inbox` for ids")
        item = ctx.call("inbox.get", {"id": args.id})
        if out.json:
            out.ok(item)
            return 0
        show(ctx, item)
        return 0
    params: dict[str, Any] = {} if args.all else {"status": "open"}
    if ctx.repo_given and ctx.repo:
        params["repo"] = ctx.repo
    items = ctx.call("inbox.list", params)["items"]
    if out.json:
        out.ok({"items": items})
        return 0
    if not items:
        out.line("nothing waits for you" if not args.all else "the inbox is empty")
        return 0
    out.table(
        ["ID", "REPO", "MODE", "STATUS", "TITLE"],
        [
            [
                clean(i["id"]),
                clean(i["repo"]),
                clean(i["mode"]),
                out.status(i["status"]),
                clean(i["title"]),
            ]
            for i in items
        ],
    )
    out.note("answer with `pokeralphctl answer ID`; details with `pokeralphctl inbox show ID`")
    return 0


def show(ctx: Context, item: dict[str, Any]) -> None:
    out = ctx.out
    d = item["delivery"]
    out.line(
        out.style(clean(d["title"]), "bold")
        + clean(f"  ({d['id']}, {d['mode']}, ")
        + out.status(d["status"])
        + clean(f", {item['repo']})")
    )
    body = (d.get("content") or {}).get("body") or ""
    if body:
        out.line("")
        out.line(clean(body, multiline=True))
    schema = d.get("feedbackSchema")
    if schema:
        out.line("")
        out.line(f"answer: {describe(schema)}")
    for fb in item["feedback"]:
        out.line(
            clean(f"answered {fb['createdAt']}: {json.dumps(fb['values'])}")
            + (f" — {clean(fb['note'], multiline=True)}" if fb.get("note") else "")
        )
    for note in item["annotations"]:
        out.line(clean(f"note {note['createdAt']}: ") + clean(note["content"], multiline=True))


def describe(schema: dict[str, Any]) -> str:
    """The answer a schema wants, in one line (its prompt and options shown escaped)."""
    return clean(_describe(schema))


def _describe(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if kind == "confirm":
        return f"{schema.get('prompt')} (--yes / --no)"
    if kind == "select":
        many = " (several: repeat --value)" if schema.get("multiple") else ""
        return f"{schema.get('prompt')}: {', '.join(schema.get('options', []))}{many}"
    if kind == "rating":
        return f"{schema.get('prompt')} (--rating 1..{schema.get('max', 5)})"
    fields = ", ".join(
        f"{f['name']}{'*' if f.get('required') else ''} ({f['type']})"
        for f in schema.get("fields", [])
    )
    return f"form: {fields} (--field NAME=VALUE)"


def _from_flags(schema: dict[str, Any], args: argparse.Namespace) -> dict[str, Any] | None:
    kind = schema.get("type")
    if kind == "confirm" and (args.yes or args.no):
        return {"value": bool(args.yes)}
    if kind == "select" and args.value:
        return {"value": args.value if schema.get("multiple") else args.value[0]}
    if kind == "rating" and args.rating is not None:
        return {"value": args.rating}
    if kind == "form" and args.field:
        types = {f["name"]: f["type"] for f in schema.get("fields", [])}
        values: dict[str, Any] = {}
        for pair in args.field:
            name, sep, raw = pair.partition("=")
            if not sep:
                raise CommandError(f"--field takes NAME=VALUE, got {pair!r}")
            values[name] = _typed(types.get(name, "text"), raw)
        return {"values": values}
    return None


def _typed(kind: str, raw: str) -> Any:
    if kind == "number":
        try:
            return int(raw) if raw.lstrip("-").isdigit() else float(raw)
        except ValueError:
            return raw
    if kind == "checkbox":
        return raw.lower() in ("1", "true", "yes", "y", "on")
    return raw


def _ask(ctx: Context, schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    prompt = clean(schema.get("prompt") or "Answer")
    if kind == "confirm":
        reply = ctx.term.ask(f"{prompt} [y/n] ").strip().lower()
        return {"value": reply in ("y", "yes")}
    if kind == "select":
        options = schema.get("options", [])
        for n, option in enumerate(options, 1):
            ctx.out.line(f"  {n}. {clean(option)}")
        reply = ctx.term.ask(
            f"{prompt} (number{'s, comma-separated' if schema.get('multiple') else ''}) "
        )
        picked = [
            options[int(x) - 1]
            for x in reply.replace(" ", "").split(",")
            if x.isdigit() and 0 < int(x) <= len(options)
        ]
        return {
            "value": picked if schema.get("multiple") else (picked[0] if picked else reply.strip())
        }
    if kind == "rating":
        reply = ctx.term.ask(f"{prompt} (1-{schema.get('max', 5)}) ").strip()
        return {"value": int(reply) if reply.isdigit() else reply}
    values: dict[str, Any] = {}
    for spec in schema.get("fields", []):
        label = clean(spec.get("label") or spec["name"])
        extra = clean(f" [{'/'.join(spec['options'])}]") if spec.get("options") else ""
        reply = ctx.term.ask(f"{label}{extra}{' *' if spec.get('required') else ''}: ")
        if reply:
            values[spec["name"]] = _typed(spec["type"], reply)
    return {"values": values}


def answer(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl answer ID``."""
    item = ctx.call("inbox.get", {"id": args.id})
    schema = item["delivery"].get("feedbackSchema")
    if not schema:
        raise CommandError(
            f"{args.id} is passive: it takes no answer", "close it with the inbox instead"
        )
    values = _from_flags(schema, args)
    if values is None:
        if not ctx.term.interactive() or ctx.out.json:
            raise CommandError(
                f"no answer given for {args.id}", f"pass it as flags: {describe(schema)}"
            )
        show(ctx, item)
        values = _ask(ctx, schema)
    result = ctx.call(
        "inbox.answer",
        {"id": args.id, "values": values, **({"note": args.note} if args.note else {})},
    )
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line(f"answered {clean(args.id)}")
    return 0
