"""``pokeralphctl deliver``: publish something to a person's inbox, and with ``--blocking``
wait for the answer and print it as JSON. Agents use it in the middle of an iteration
(the daemon gives them POKERALPH_SOCKET, POKERALPH_REPO_PATH and POKERALPH_TASK_ID).

Exit codes: 0 answered (or published, when not blocking), 5 timed out (the delivery stays
answerable: `pokeralphctl inbox show ID`), others as every command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context

EXIT_TIMEOUT = 5


def add_deliver(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--body", help="markdown body: a file, or - for standard input")
    parser.add_argument("--schema", choices=["confirm", "select", "form", "rating"])
    parser.add_argument("--prompt", help="the question shown with the schema")
    parser.add_argument("--option", action="append", help="a select option (repeat)")
    parser.add_argument("--multiple", action="store_true", help="select several options")
    parser.add_argument(
        "--field", action="append", metavar="NAME:TYPE[:required]", help="a form field (repeat)"
    )
    parser.add_argument("--max", type=int, help="rating maximum (default 5)")
    parser.add_argument("--blocking", action="store_true", help="wait for the answer and print it")
    parser.add_argument(
        "--timeout", type=float, help="seconds to wait when blocking (default: forever)"
    )
    parser.set_defaults(handler=deliver)


def schema_of(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.schema is None:
        return None
    schema: dict[str, Any] = {"type": args.schema}
    if args.prompt:
        schema["prompt"] = args.prompt
    if args.schema == "select":
        if not args.option:
            raise CommandError("--schema select needs --option (repeat it for each choice)")
        schema.update(options=args.option, multiple=args.multiple)
    elif args.schema == "rating" and args.max is not None:
        schema["max"] = args.max
    elif args.schema == "form":
        fields = []
        for spec in args.field or []:
            parts = spec.split(":")
            field: dict[str, Any] = {
                "name": parts[0],
                "type": parts[1] if len(parts) > 1 else "text",
            }
            if "required" in parts[2:]:
                field["required"] = True
            fields.append(field)
        if not fields:
            raise CommandError("--schema form needs --field NAME:TYPE[:required] (repeat it)")
        schema["fields"] = fields
    return schema


def deliver(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl deliver``."""
    body = ""
    if args.body == "-":
        body = ctx.term.stdin.read()
    elif args.body:
        try:
            with open(ctx.term.abspath(args.body), encoding="utf-8") as handle:
                body = handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {args.body}: {exc.strerror}") from exc
    schema = schema_of(args)
    mode = "blocking" if args.blocking else ("interactive" if schema else "passive")
    if args.blocking and schema is None:
        raise CommandError("--blocking needs --schema (what kind of answer to wait for)")
    if not ctx.repo_given and ctx.term.env.get("POKERALPH_REPO_PATH"):
        ctx.repo = ctx.term.env["POKERALPH_REPO_PATH"]
    params = ctx.params(
        title=args.title,
        body=body,
        mode=mode,
        schema=schema,
        timeoutSeconds=args.timeout if args.blocking else None,
        taskId=ctx.term.env.get("POKERALPH_TASK_ID") or None,
    )
    created = ctx.call("inbox.create", params)
    delivery = created["delivery"]
    if not args.blocking:
        if ctx.out.json:
            ctx.out.ok(created)
        else:
            ctx.out.line(delivery["id"])
        return 0
    with ctx.connect(timeout=None) as conn:
        result = conn.call("inbox.wait", {"id": delivery["id"], "timeout": args.timeout})
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line(json.dumps(result))  # {"status", "id", "repo", "answer": {"values", "note"…}}
    return 0 if result["status"] == "answered" else EXIT_TIMEOUT
