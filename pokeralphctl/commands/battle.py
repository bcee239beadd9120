"""``pokeralphctl battle …`` and ``pokeralphctl approve``: start, control and inspect battles.

Following (``battle start --follow``, ``battle log --follow``) lives in
:mod:`pokeralphctl.commands.follow`; this module builds the params and prints results.
"""

from __future__ import annotations

from pokeralphctl.commands import CommandError
from pokeralphctl.output import clean, duration, money
from pokeralphctl.parsing import sub

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from pokeralphctl.commands import Context
    from pokeralphctl.output import Output


def add_battle(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")

    p = sub(subs, "start", "start a battle for a task (or --all ready tasks)")
    p.add_argument("task_id", nargs="?", metavar="TASK")
    p.add_argument(
        "--all",
        action="store_true",
        help="every pending task whose dependencies are completed, in priority order, up "
        "to parallelBattles at once; the rest start as battles end",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--yolo", dest="mode", action="store_const", const="yolo", help="run without approvals"
    )
    mode.add_argument(
        "--hitl", dest="mode", action="store_const", const="hitl", help="approve each iteration"
    )
    p.add_argument("--max-iterations", type=int, metavar="N", help="override the config")
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="print its events until it ends (exit 0 when complete, 1 when failed or "
        "cancelled, 3 when escalated to a person), asking for approvals on a terminal",
    )
    p.set_defaults(handler=start)

    p = sub(subs, "pause", "pause at the end of the running iteration")
    _task_arg(p)
    p.add_argument("--now", action="store_true", help="stop the agent at once")
    p.set_defaults(handler=control, method="battle.pause")

    for name, help_line in (
        ("resume", "resume a paused battle"),
        ("cancel", "cancel the battle (the agent's processes are ended)"),
    ):
        p = sub(subs, name, help_line)
        _task_arg(p)
        p.set_defaults(handler=control, method=f"battle.{name}")

    p = sub(subs, "approve", "approve (or --reject) the iteration awaiting approval")
    add_approve(p)

    p = sub(
        subs, "resolve", "answer an escalated battle: retry (with --guidance), accept or cancel"
    )
    p.add_argument("action", choices=["retry", "accept", "cancel"])
    p.add_argument("task_id", nargs="?", metavar="TASK")
    p.add_argument("--guidance", help="what the implementer should do differently (with retry)")
    p.set_defaults(handler=resolve)

    p = sub(subs, "show", "active battles, or one task's live progress and phase")
    p.add_argument("task_id", nargs="?", metavar="TASK")
    p.add_argument("--all", action="store_true", help="active battles of every repository")
    p.set_defaults(handler=show)

    p = sub(subs, "history", "a task's battle with every iteration and report")
    p.add_argument("task_id", metavar="TASK")
    p.add_argument(
        "--calls", action="store_true", help="also every tool call: how it was decided, its result"
    )
    p.set_defaults(handler=history)

    p = sub(subs, "report", "a verification or review report (default: the latest)")
    p.add_argument("task_id", metavar="TASK")
    p.add_argument("phase", choices=("verification", "review"), metavar="PHASE")
    p.add_argument("--cycle", type=int, metavar="N", help="this cycle's report")
    p.set_defaults(handler=report)

    p = sub(subs, "log", "an iteration's log (default: the latest iteration)")
    p.add_argument("task_id", metavar="TASK")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.add_argument("--iteration", type=int, metavar="K", help="this iteration's log")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing as the agent writes")
    p.set_defaults(handler=log)

    p = sub(subs, "revert", "undo the task's last PokéRalph commit with a revert commit")
    p.add_argument("task_id", metavar="TASK")
    p.set_defaults(handler=revert)


def _task_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "task_id", nargs="?", metavar="TASK", help="the battle's task (default: the active one)"
    )


def add_approve(parser: argparse.ArgumentParser) -> None:
    _task_arg(parser)
    parser.add_argument("--reject", action="store_true", help="reject instead: the battle pauses")
    parser.add_argument("--note", metavar="TEXT", help="a note for the next iteration's prompt")
    parser.set_defaults(handler=approve)


# --------------------------------------------------------------------------- params


def start_params(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    params = ctx.params(taskId=args.task_id, mode=args.mode, maxIterations=args.max_iterations)
    if getattr(args, "all", False):
        params["all"] = True
    return params


def control_params(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    params = ctx.params(taskId=args.task_id)
    if args.method == "battle.pause" and args.now:
        params["now"] = True
    return params


def approve_params(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    return ctx.params(approve=not args.reject, note=args.note, taskId=args.task_id)


def log_params(args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    return ctx.params(taskId=args.task_id, iteration=args.iteration, tail=args.lines)


# --------------------------------------------------------------------------- handlers


def battle_line(out: Output, battle: dict[str, Any]) -> str:
    iterations = battle.get("iterations") or []
    limit = battle.get("maxIterations")
    return (
        f"{out.style(clean(battle['taskId']), 'bold')} {out.status(battle['status'])}, "
        f"{clean(battle.get('mode'))}, {len(iterations)}/{clean(limit or '?')} iterations, "
        f"{money(battle.get('costUsd'))}{phase_text(battle)}"
    )


def phase_text(battle: dict[str, Any]) -> str:
    """``, phase verification (cycle 2/3)`` for a battle of seed 003's phases."""
    phase = battle.get("phase")
    if not phase or battle.get("phases") in (None, ["implementation"]):
        return ""
    cycles = battle.get(phase) if phase in ("verification", "review") else None
    if isinstance(cycles, dict):
        return f", phase {clean(phase)} (cycle {cycles.get('count', 0) + 1}/{cycles.get('limit')})"
    return f", phase {clean(phase)}"


def escalation_lines(out: Output, battle: dict[str, Any]) -> list[str]:
    """What a blocked or escalated battle waits for."""
    lines = []
    blocked = battle.get("blocked")
    if battle["status"] == "blocked" and isinstance(blocked, dict):
        lines.append(f"blocked:     {clean(blocked['reason'])}")
    escalations = battle.get("escalations") or []
    last = escalations[-1] if escalations else None
    if battle["status"] == "escalated" and isinstance(last, dict):
        lines.append(f"escalated:   {out.style(clean(last['message']), 'magenta')}")
        if last.get("deliveryId"):
            lines.append(
                f"             answer it: `pokeralphctl inbox show {clean(last['deliveryId'])}`"
            )
    return lines


def start(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle start``."""
    from pokeralphctl.commands.trust import check

    check(ctx)  # warn first when the repository's config is not trusted
    if args.all and args.task_id:
        raise CommandError("give a TASK or --all, not both", code="usage")
    if not args.all and not args.task_id:
        raise CommandError("name a TASK to start (or --all)", code="usage")
    if args.all and args.follow:
        raise CommandError(
            "--follow follows one battle: use `pokeralphctl watch` with --all", code="usage"
        )
    if args.follow:
        from pokeralphctl.commands.follow import start_and_follow

        return start_and_follow(ctx, args, start_params(ctx, args))
    result = ctx.call("battle.start", start_params(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    if args.all:
        return _started_all(out, result)
    battle = result["battle"]
    queued = " (queued: waiting for a free slot)" if result["queued"] else ""
    out.line(f"started: {battle_line(out, battle)}{queued}")
    out.note(
        f"follow it with `pokeralphctl battle log -f {clean(battle['taskId'])}` "
        "or `pokeralphctl watch`",
        "dim",
    )
    return 0


def _started_all(out: Output, result: dict[str, Any]) -> int:
    started = [clean(t) for t in result.get("started") or []]
    waiting = [clean(t) for t in result.get("waiting") or []]
    out.line(f"started: {', '.join(started) if started else 'nothing (no task is ready)'}")
    if waiting:
        out.line(f"waiting: {', '.join(waiting)} (for a free place or their dependencies)")
    for task, why in (result.get("refused") or {}).items():
        out.line(f"not started: {clean(task)}: {clean(why)}")
    out.note("follow them with `pokeralphctl watch`", "dim")
    return 0


def control(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle pause|resume|cancel``."""
    result = ctx.call(args.method, control_params(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    battle = result["battle"]
    if result.get("pauseRequested") and battle["status"] != "paused":
        out.line(f"pause requested: {battle_line(out, battle)}")
        out.note("it pauses at the end of the running iteration (--now stops it at once)", "dim")
    else:
        out.line(battle_line(out, battle))
    if battle["status"] == "paused":
        out.note(f"resume with `pokeralphctl battle resume {battle['taskId']}`", "dim")
    return 0


def approve(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle approve`` or ``pokeralphctl approve``."""
    result = ctx.call("battle.approve", approve_params(ctx, args))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    battle = result["battle"]
    verb = "rejected" if args.reject else "approved"
    out.line(f"{verb}: {battle_line(out, battle)}")
    if args.reject:
        out.note(f"the battle pauses; `pokeralphctl battle resume {battle['taskId']}`", "dim")
    return 0


def resolve(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle resolve``."""
    params: dict[str, Any] = {"action": args.action}
    if args.guidance:
        params["guidance"] = args.guidance
    result = ctx.call("battle.resolve", ctx.params(taskId=args.task_id, **params))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    out.line(f"{args.action}: {battle_line(out, result['battle'])}")
    return 0


def revert(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle revert``."""
    result = ctx.call("battle.revert", ctx.params(taskId=args.task_id))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    out.line(f"reverted the last commit of {clean(args.task_id)}: {clean(result['revertCommit'])}")
    return 0


def show(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle show``."""
    out = ctx.out
    if args.task_id:
        result = ctx.call("battle.progress", ctx.params(taskId=args.task_id))
        battle = ctx.call("battle.history", ctx.params(taskId=args.task_id))["battle"]
        if out.json:
            out.ok({**result, "battle": battle})
        else:
            print_progress(out, args.task_id, result["progress"])
            if battle:
                print_phases(out, battle)
                runs = [it.get("sandbox") for it in battle.get("iterations") or []]
                if runs and isinstance(runs[-1], dict):
                    out.line(sandbox_line(out, runs[-1]))
        return 0
    result = ctx.call("battle.current", {} if args.all else ctx.params())
    if out.json:
        out.ok(result)
        return 0
    battles = result["battles"]
    if not battles:
        out.line("no active battle: start one with `pokeralphctl battle start TASK`")
        return 0
    rows = [
        [
            clean(b["repo"]),
            clean(b["taskId"]),
            out.status(b["status"]),
            clean(_summary_phase(b)),
            clean(f"{b['iteration']}/{b['maxIterations'] or '?'}"),
            clean(b["mode"]),
            money(b["costUsd"]),
            clean(_waits_for(b)),
        ]
        for b in battles
    ]
    out.table(["repo", "task", "status", "phase", "iteration", "mode", "cost", "note"], rows)
    for b in battles:
        if b.get("worktree"):
            out.line(
                out.style(
                    clean(f"  {b['taskId']}: branch {b.get('branch')} in {b['worktree']}"),
                    "dim",
                )
            )
        for warning in b.get("warnings") or []:
            out.line(out.style(clean(f"! {b['taskId']}: {warning}"), "yellow"))
    return 0


def sandbox_line(out: Output, box: dict[str, Any]) -> str:
    """One run's sandbox (``Iteration.sandbox``) in a line: what confined it, or a
    warning saying why nothing did."""
    if not box.get("confined"):
        why = clean(f"! sandbox: none (sandbox.mode {box.get('mode')}): {box.get('reason')}")
        return out.style(why, "yellow")
    network = str(box.get("network"))
    allow = box.get("allow") or []
    if network == "allowlist":
        network += f" ({', '.join(str(a) for a in allow) or 'no host'}; others asked)"
    writable = ", ".join(str(w) for w in box.get("writable") or []) or "nothing"
    hidden = len(box.get("hidden") or [])
    return clean(
        f"sandbox: bwrap, network {network}, writable {writable}, "
        f"{len(box.get('readOnly') or [])} read-only, {hidden} hidden"
    )


def _summary_phase(b: dict[str, Any]) -> str:
    phase = str(b.get("phase") or "implementation")
    cycle = {"verification": b.get("verificationCycle"), "review": b.get("reviewCycle")}.get(phase)
    return f"{phase} {int(cycle or 0) + 1}" if cycle is not None else phase


def _waits_for(b: dict[str, Any]) -> str:
    escalation = b.get("escalation")
    if isinstance(escalation, dict):
        return f"escalated: answer inbox item {escalation.get('deliveryId')}"
    return str(b.get("blockedReason") or b["pausedReason"] or "")


def print_phases(out: Output, battle: dict[str, Any]) -> None:
    """The battle's phase, its cycles, and what it waits for (seed 003)."""
    phases = battle.get("phases") or ["implementation"]
    out.line(f"phase:       {clean(battle.get('phase'))} (of {clean(', '.join(phases))})")
    for name in ("verification", "review"):
        cycles = battle.get(name) or {}
        if name in phases or cycles.get("count"):
            reports = cycles.get("reports") or []
            last = reports[-1] if reports else None
            text = f"{cycles.get('count', 0)}/{cycles.get('limit')} cycles"
            if last:
                text += f", last {out.status(last.get('outcome'))}"
            out.line(f"{name + ':':<12} {text}")
    for line in escalation_lines(out, battle):
        out.line(line)


def report_rows(out: Output, battle: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name in ("verification", "review"):
        for r in (battle.get(name) or {}).get("reports") or []:
            what = r.get("problem") or r.get("summary") or ""
            rows.append(
                [
                    clean(name),
                    r["cycle"],
                    out.status(r.get("outcome")),
                    "yes" if r.get("passed") else "no",
                    clean(r.get("iteration") or "-"),
                    f"{r.get('findings', 0)} ({r.get('blocking', 0)})",
                    clean(" ".join(str(what).split())[:70]),
                ]
            )
    return rows


def print_progress(out: Output, task_id: str, progress: dict[str, Any] | None) -> None:
    if not progress:
        out.line(f"no battle for {task_id} yet: `pokeralphctl battle start {task_id}`")
        return
    out.line(f"{out.style(clean(task_id), 'bold')} {out.status(progress.get('status'))}")
    out.line(f"iteration:   {clean(progress.get('currentIteration'))}")
    out.line(f"updated:     {clean(progress.get('lastUpdate'))}")
    if progress.get("error"):
        out.line(f"error:       {out.style(clean(progress['error']), 'red')}")
    feedback = progress.get("feedbackResults") or {}
    if feedback:
        loops = ", ".join(
            f"{clean(name)} {out.status('passed' if r.get('passed') else 'failed')}"
            for name, r in feedback.items()
        )
        out.line(f"feedback:    {loops}")
    last = clean(progress.get("lastOutput") or "", multiline=True).rstrip().splitlines()[-10:]
    if last:
        out.line("last output:")
        for line in last:
            out.line(f"  {line if len(line) <= 160 else line[:159] + '…'}")


def history(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle history``."""
    result = ctx.call("battle.history", ctx.params(taskId=args.task_id))
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    battle = result["battle"]
    if not battle:
        out.line(f"no battle for {args.task_id} yet: `pokeralphctl battle start {args.task_id}`")
        return 0
    out.line(f"{battle_line(out, battle)}, attempt {battle.get('attempt', 1)}")
    out.line(out.style(clean(f"started {battle['startedAt']}"), "dim"))
    if battle.get("error"):
        out.line(f"error: {out.style(clean(battle['error'], multiline=True), 'red')}")
    iterations = battle.get("iterations") or []
    if not iterations:
        return 0
    out.line()
    rows = [
        [
            it["number"],
            out.status(it["result"]),
            duration(it.get("durationMs")),
            money(it.get("costUsd")),
            len(it.get("filesChanged") or []),
            tools_cell(it),
            clean(str(it.get("commitHash") or "-")[:8]),
            clean(it.get("error") or ""),
        ]
        for it in iterations
    ]
    out.table(["#", "result", "duration", "cost", "files", "tools", "commit", "error"], rows)
    shown: object = None
    for it in iterations:  # each run's sandbox, once per change
        box = it.get("sandbox")
        if isinstance(box, dict) and box != shown:
            out.line(f"iteration {it['number']}: " + sandbox_line(out, box))
            shown = box
    if getattr(args, "calls", False):
        for it in iterations:
            calls = it.get("toolCalls") or []
            if not calls:
                continue
            out.line()
            out.line(out.style(f"iteration {it['number']}: {len(calls)} tool calls", "bold"))
            for call in calls:
                out.line("  " + call_line(out, call))
            if it.get("toolCallsOmitted"):
                out.line(f"  … {it['toolCallsOmitted']} more, not recorded")
    reports = report_rows(out, battle)
    if reports:
        out.line()
        out.table(
            ["phase", "cycle", "outcome", "passed", "after", "findings (blocking)", "summary"],
            reports,
        )
        out.note(
            f"read one whole: `pokeralphctl battle report {clean(args.task_id)} verification|review "
            "[--cycle N]`",
            "dim",
        )
    escalations = battle.get("escalations") or []
    for e in escalations:
        resolution = e.get("resolution") or {}
        answer = (
            f"answered {clean(resolution['action'])}"
            + (f": {clean(resolution['guidance'])}" if resolution.get("guidance") else "")
            if resolution
            else "waiting for an answer"
        )
        out.line(f"escalation {e['number']} ({clean(e['reason'])}): {answer}")
    for line in escalation_lines(out, battle):
        out.line(line)
    return 0


def report(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle report``."""
    result = ctx.call(
        "battle.report", ctx.params(taskId=args.task_id, phase=args.phase, cycle=args.cycle)
    )
    out = ctx.out
    if out.json:
        out.ok(result)
        return 0
    r = result["report"]
    outcome = r.get("recommendation") or r.get("assessment")
    head = f"{clean(args.phase)} report {r['cycle']} of {clean(r['taskId'])}: "
    out.line(head + (out.status(outcome) if r.get("valid") else out.status("invalid")))
    if not r.get("valid"):
        out.line(f"problem: {out.style(clean(r.get('problem')), 'red')}")
        if r.get("raw"):
            out.line("the agent said:")
            for line in clean(r["raw"], multiline=True).splitlines()[-15:]:
                out.line(f"  {line}")
    agent = r.get("agent") or {}
    out.line(
        out.style(
            clean(
                f"by {agent.get('backend')}{' ' + agent['model'] if agent.get('model') else ''}, "
                f"after iteration {r.get('iteration')}, at {str(r.get('headCommit') or '-')[:10]}, "
                f"{money(agent.get('costUsd'))}"
            ),
            "dim",
        )
    )
    for c in r.get("acceptanceCriteria") or []:
        out.line(
            f"  {out.status(c.get('status'))} {clean(c.get('criterion'))}: {clean(c.get('evidence'))}"
        )
    summary = (r.get("testResults") or {}).get("summary") or {}
    if summary.get("total"):
        out.line(
            f"tests: {summary.get('passed')} passed, {summary.get('failed')} failed, {summary.get('total')} in all"
        )
    feedback = r.get("feedback") or {}
    items = feedback.get("items") or r.get("comments") or []
    if feedback.get("summary") or feedback.get("message"):
        out.line(clean(feedback.get("summary") or feedback.get("message"), multiline=True))
    for item in items:
        where = f"{item['file']}:{item.get('line') or ''} " if item.get("file") else ""
        flag = " BLOCKING" if item.get("blocking") else ""
        text = item.get("description") or item.get("issue")
        out.line(f"  - [{clean(item.get('severity'))}{flag}] {clean(where)}{clean(text)}")
    for key, label in (("discardedChanges", "put back"), ("keptChanges", "changed, kept")):
        if r.get(key):
            out.line(f"{label}: {clean(', '.join(r[key]))}")
    return 0


def tools_cell(iteration: dict[str, Any]) -> str:
    """How many tool calls an iteration made, and how many were refused."""
    calls = iteration.get("toolCalls") or []
    total = len(calls) + int(iteration.get("toolCallsOmitted") or 0)
    refused = sum(1 for c in calls if c.get("status") == "rejected")
    return f"{total} ({refused} denied)" if refused else str(total)


def call_line(out: Output, call: dict[str, Any]) -> str:
    """One tool call: its tool and input, what became of it, and who decided."""
    status = str(call.get("status"))
    how = {
        "config_rule": f"by rule {call.get('ruleId')}",
        "manual": "by a person",
        "auto": "automatically",
    }.get(str(call.get("approvalMethod")), "undecided")
    color = {"executed": "green", "rejected": "red", "failed": "red"}.get(status, "yellow")
    text = f"{call.get('toolName')} {clean(str(call.get('input') or ''))[:120]}"
    line = f"{out.style(status, color)} {how}: {text}"
    if call.get("message"):
        line += " · " + clean(str(call["message"]))[:200]
    result = call.get("result") or {}
    if result.get("filesAffected"):
        line += " · " + ", ".join(clean(str(f)) for f in result["filesAffected"])
    return line


def log(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl battle log``."""
    from pokeralphctl.commands.follow import follow_log, read_log

    if args.follow:
        return follow_log(ctx, args, log_params(args, ctx))
    result = read_log(ctx, log_params(args, ctx))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.write(result["data"])
    return 0
