"""``pokeralphctl task list|add|show|edit|rm``: the PRD's tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean
from pokeralphctl.parsing import sub

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context
    from pokeralphctl.output import Output

STATUS_HELP = "pending, planning, in_progress, paused, completed or failed"


def add_task(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")

    p = sub(subs, "list", "list tasks in priority order", aliases=["ls"])
    p.add_argument(
        "--status", metavar="STATUS", help=f"only tasks with this status ({STATUS_HELP})"
    )
    p.set_defaults(handler=list_tasks)

    p = sub(subs, "add", "add a task (its id is made from the title unless --id)")
    p.add_argument("title", metavar="TITLE")
    p.add_argument("-d", "--description", required=True, help="what the task is about")
    p.add_argument(
        "-c",
        "--criteria",
        action="append",
        required=True,
        metavar="CRITERION",
        help="an acceptance criterion (repeat for several)",
    )
    p.add_argument("--priority", type=int, help="1 runs first (default: after the others)")
    p.add_argument("--id", help="the task id, like 004-login-form")
    p.add_argument(
        "--depends-on",
        action="append",
        metavar="ID",
        help="a task that must be completed first (repeat for several)",
    )
    p.set_defaults(handler=add)

    p = sub(subs, "show", "show one task")
    p.add_argument("task_id", metavar="ID")
    p.set_defaults(handler=show)

    p = sub(subs, "edit", "change a task's fields")
    p.add_argument("task_id", metavar="ID")
    p.add_argument("--title")
    p.add_argument("-d", "--description")
    p.add_argument(
        "-c",
        "--criteria",
        action="append",
        metavar="CRITERION",
        help="replaces all criteria (repeat for several)",
    )
    p.add_argument("--priority", type=int)
    deps = p.add_mutually_exclusive_group()
    deps.add_argument(
        "--depends-on",
        action="append",
        metavar="ID",
        help="replaces the tasks this one waits for (repeat for several)",
    )
    deps.add_argument("--no-depends", action="store_true", help="this task waits for no other task")
    p.add_argument(
        "--status", metavar="STATUS", help=f"{STATUS_HELP}; must follow the task state machine"
    )
    p.set_defaults(handler=edit)

    p = sub(subs, "rm", "remove a task (its battle files stay)", aliases=["remove"])
    p.add_argument("task_id", metavar="ID")
    p.set_defaults(handler=remove)


def list_tasks(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl task list``."""
    result = ctx.call("task.list", ctx.params(status=args.status))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    tasks = result["tasks"]
    if not tasks:
        what = f"no {args.status} tasks" if args.status else "no tasks"
        out.line(f"{what}: add one with `pokeralphctl task add TITLE -d DESCRIPTION -c CRITERION`")
        return 0
    rows = [
        [clean(t["id"]), out.status(t["status"]), t.get("priority"), clean(t["title"])]
        for t in tasks
    ]
    out.table(["id", "status", "priority", "title"], rows)
    return 0


def add(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl task add``."""
    params = ctx.params(
        title=args.title,
        description=args.description,
        acceptanceCriteria=args.criteria,
        priority=args.priority,
        id=args.id,
        dependsOn=args.depends_on,
    )
    result = ctx.call("task.create", params)
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        task = result["task"]
        task_id = clean(task["id"])
        ctx.out.line(f"added {ctx.out.style(task_id, 'bold')}: {clean(task['title'])}")
        ctx.out.note(f"start it with `pokeralphctl battle start {task_id}`", "dim")
    return 0


def show(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl task show``."""
    result = ctx.call("task.get", ctx.params(taskId=args.task_id))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        print_task(ctx.out, result["task"])
    return 0


def print_task(out: Output, task: dict[str, Any]) -> None:
    out.line(f"{out.style(clean(task['id']), 'bold')}  {clean(task['title'])}")
    out.line(f"status:      {out.status(task.get('status'))}")
    out.line(f"priority:    {clean(task.get('priority'))}")
    if task.get("dependsOn"):
        out.line(f"depends on:  {', '.join(clean(d) for d in task['dependsOn'])}")
    out.line(f"created:     {clean(task.get('createdAt', '-'))}")
    out.line(f"updated:     {clean(task.get('updatedAt', '-'))}")
    iterations = task.get("iterations") or []
    if iterations:
        out.line(f"iterations:  {len(iterations)}")
    out.line("description:")
    description = clean(task.get("description", ""), multiline=True)
    for line in description.splitlines() or [""]:
        out.line(f"  {line}")
    out.line("acceptance criteria:")
    for criterion in task.get("acceptanceCriteria") or []:
        out.line(f"  - {clean(criterion)}")


def edit(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl task edit``."""
    fields = {
        "title": args.title,
        "description": args.description,
        "acceptanceCriteria": args.criteria,
        "priority": args.priority,
        "status": args.status,
        "dependsOn": [] if args.no_depends else args.depends_on,
    }
    if all(v is None for v in fields.values()):
        raise CommandError(
            "nothing to change",
            "pass at least one of --title, --description, --criteria, --priority, --status, "
            "--depends-on, --no-depends",
            code="usage",
        )
    result = ctx.call("task.update", ctx.params(taskId=args.task_id, **fields))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        task = result["task"]
        changed = ", ".join(k for k, v in fields.items() if v is not None)
        ctx.out.line(f"updated {ctx.out.style(clean(task['id']), 'bold')} ({changed})")
    return 0


def remove(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl task rm``."""
    result = ctx.call("task.delete", ctx.params(taskId=args.task_id))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line(f"removed {clean(result['taskId'])}")
    return 0
