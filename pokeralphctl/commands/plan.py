"""``pokeralphctl plan "IDEA"``: plan with the agent, at the terminal.

Interactive on a terminal: the agent's output is shown live, its questions are asked at
the prompt, and the task list is shown at the end to confirm before saving. Scripts use
``--answer`` (repeatable, one per question round), ``--yes`` to save, ``--json`` for
events as NDJSON; a question with no answer left exits 6 with the question printed, to be
answered later with ``pokeralphctl plan --answer "…"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError
from pokeralphctl.commands.render import render
from pokeralphctl.output import clean

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context

EXIT_QUESTION = 6
EVENTS = ["planning_output", "planning_question", "planning_completed", "planning_failed"]


def add_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("idea", nargs="?", help="what to build (omit to continue the session)")
    parser.add_argument(
        "--breakdown", action="store_true", help="turn the PRD's description into tasks"
    )
    parser.add_argument(
        "--answer", action="append", help="answer to the next question round (repeat)"
    )
    parser.add_argument("--yes", action="store_true", help="save the PRD without asking")
    parser.add_argument("--merge", action="store_true", help="add the tasks to the existing PRD")
    parser.add_argument("--reset", action="store_true", help="forget the planning session")
    parser.set_defaults(handler=plan)


def plan(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl plan``."""
    out = ctx.out
    if args.reset:
        result = ctx.call("planning.reset", ctx.params())
        out.ok(result) if out.json else out.line("planning reset")
        return 0
    answers = list(args.answer or [])
    interactive = ctx.term.interactive() and not out.json
    stream = ctx.stream(repo=ctx.repo, types=EVENTS)
    try:
        stream.open()
        status = ctx.call("planning.status", ctx.params())
        if args.idea or args.breakdown:
            ctx.call("planning.start", ctx.params(idea=args.idea, breakdown=args.breakdown or None))
        elif status["state"] == "waiting_input" and answers:
            ctx.call("planning.answer", ctx.params(answer=answers.pop(0)))
        elif status["state"] == "completed":
            return _finish(ctx, args, interactive)
        elif status["state"] == "idle":
            raise CommandError("no planning session", 'start one with `pokeralphctl plan "IDEA"`')
        for event in stream.events():
            if out.json:
                out.ndjson(event)
            else:
                for line in render(out, event, prefix=False):
                    out.line(line)
            kind = event["type"]
            if kind == "planning_failed":
                return 1
            if kind == "planning_completed":
                return _finish(ctx, args, interactive)
            if kind == "planning_question":
                reply = answers.pop(0) if answers else None
                if reply is None and interactive:
                    out.line(clean(event["payload"]["question"], multiline=True))
                    reply = _read_multiline(ctx)
                if not reply:
                    if not out.json:
                        out.note('answer with `pokeralphctl plan --answer "…"` (or in the inbox)')
                    return EXIT_QUESTION
                ctx.call("planning.answer", ctx.params(answer=reply))
        return 1
    finally:
        stream.close()


def _read_multiline(ctx: Context) -> str:
    ctx.out.line("your answer (an empty line ends it):")
    ctx.out.stdout.flush()
    lines = []
    while True:
        try:
            line = ctx.term.ask("> ")
        except EOFError:
            break
        if not line:
            break
        lines.append(line)
    return "\n".join(lines)


def _finish(ctx: Context, args: argparse.Namespace, interactive: bool) -> int:
    out = ctx.out
    merge = "merge" if args.merge else "replace"
    preview: dict[str, Any] = ctx.call("planning.finish", ctx.params(save=False, merge=merge))
    if not preview["valid"]:
        if out.json:
            out.ok(preview)
        else:
            out.line("the agent's PRD is not valid:")
            for p in preview["problems"]:
                out.line(clean(f"  {p['field']}: {p['problem']}"))
            out.note('plan again with `pokeralphctl plan --reset` then `pokeralphctl plan "IDEA"`')
        return 1
    prd = preview["prd"]
    if not out.json:
        out.line(out.style(clean(prd["name"]), "bold"))
        out.line(clean(prd["description"], multiline=True))
        out.table(
            ["ID", "PRI", "TITLE", "CRITERIA"],
            [
                [clean(t["id"]), t["priority"], clean(t["title"]), len(t["acceptanceCriteria"])]
                for t in prd["tasks"]
            ],
        )
    save = args.yes
    if not save and interactive:
        save = ctx.term.ask(f"save this PRD ({merge})? [y/N] ").strip().lower() in ("y", "yes")
    if not save:
        if out.json:
            out.ok(preview)
        else:
            out.note("not saved; save with `pokeralphctl plan --yes`")
        return 0
    saved = ctx.call("planning.finish", ctx.params(save=True, merge=merge))
    out.ok(saved) if out.json else out.line(f"saved {len(saved['prd']['tasks'])} tasks")
    return 0
