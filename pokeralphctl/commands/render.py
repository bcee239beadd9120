"""Human lines for events: ``HH:MM:SS repo task type summary``, one summary per type.

``iteration_output`` becomes the agent's own text lines, tool calls as ``→ Tool input``;
tool results, stderr and progress updates are shown only with ``-v``. Every piece of a
line that comes from the event is passed through :func:`~pokeralphctl.output.clean`
before it is coloured: an agent's output cannot drive the terminal.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pokeralphctl.output import clean, dumps, duration, money

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralphctl.output import Output

MAX_INLINE = 160

#: What reading an event without the shape of its type raises: a field missing, a value
#: of another type. :func:`render` catches these in one place, not field by field.
SHAPE_ERRORS = (LookupError, TypeError, AttributeError, ValueError)


def clock(timestamp: Any) -> str:
    """The event's time as local ``HH:MM:SS``."""
    try:
        when = datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError:
        return "--:--:--"
    return when.astimezone().strftime("%H:%M:%S")


def shorten(text: str, limit: int = MAX_INLINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        out: list[str] = []
        for key, inner in value.items():
            out.extend(_flat(inner, f"{prefix}.{key}" if prefix else key))
        return out
    return [f"{prefix}={value if isinstance(value, str) else dumps(value)}"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _feedback(results: dict[str, bool]) -> str:
    return " ".join(f"{loop} {'ok' if passed else 'FAILED'}" for loop, passed in results.items())


def _at(epoch: float) -> str:
    """Epoch seconds as local ``HH:MM:SS`` (ValueError when no time is that)."""
    try:
        return datetime.fromtimestamp(float(epoch)).strftime("%H:%M:%S")
    except (OverflowError, OSError) as exc:
        raise ValueError(f"not a time: {epoch!r}") from exc


def _iteration_end(p: dict[str, Any]) -> str:
    parts = [f"iteration {p['iteration']}: {p['result']}"]
    if p["durationMs"] is not None:
        parts.append(duration(p["durationMs"]))
    if p["costUsd"] is not None:
        parts.append(f"{money(p['costUsd'])} (battle {money(p['battleCostUsd'])})")
    parts.append(_plural(len(p["filesChanged"]), "file"))
    if p["commitHash"]:
        parts.append(f"commit {p['commitHash'][:8]}")
    if feedback := _feedback(p["feedback"]):
        parts.append(feedback)
    text = ", ".join(parts)
    return f"{text}; error: {shorten(p['error'])}" if p["error"] else text


def _paused(p: dict[str, Any]) -> str:
    text = f"paused: {p['reason']}"
    if p.get("recovered"):
        text += " (found running after a daemon restart)"
    if p.get("rateLimitedUntil") is not None:
        text += f" (rate limited until {_at(p['rateLimitedUntil'])})"
    return text + "; resume with `pokeralphctl battle resume`"


def _task_updated(p: dict[str, Any]) -> str:
    changed: list[str] = p["changed"]
    status = p["task"].get("status")  # a task's status has a default: the schema may omit it
    if "status" in changed and status is not None:
        others = [c for c in changed if c != "status"]
        return f"status -> {status}" + (f" ({', '.join(others)})" if others else "")
    return "changed " + ", ".join(changed)


def _resumed(p: dict[str, Any]) -> str:
    text = "resumed"
    if p.get("iteration") is not None:
        text += f" at iteration {p['iteration']}"
    return text + (f" ({p['reason']})" if p.get("reason") else "")


def _approval(p: dict[str, Any]) -> str:
    text = f"iteration {p['iteration']} {'approved' if p['approved'] else 'rejected'}"
    return text + (f": {shorten(p['note'])}" if p["note"] else "")


def _answered(p: dict[str, Any]) -> str:
    feedback = p["feedback"]
    text = f"inbox item {p['id']} answered: {dumps(feedback['values'])}"
    return text + (f" ({shorten(feedback['note'])})" if feedback.get("note") else "")


def _report(p: dict[str, Any], counts: dict[str, int] | None) -> str:
    """A verification report (with its criteria ``counts``) or a review report in a line
    (seed 003)."""
    head = f"cycle {p['cycle']}/{p['maxCycles']}: "
    if not p["valid"]:
        problem = f" ({shorten(p['problem'])})" if p["problem"] else ""
        return head + "unusable report" + problem
    text = f"{head}{p['outcome']}" + (" (passed)" if p["passed"] else "")
    if counts is not None:
        text += f", criteria {counts['passed']} passed, {counts['failed']} failed"
        text += f", {counts['blocked']} blocked"
    else:
        text += f", {_plural(p['findings'], 'comment')} ({p['blocking']} blocking)"
    return text + (f"; {shorten(p['summary'], 100)}" if p["summary"] else "")


def _blocked(p: dict[str, Any]) -> str:
    text = f"blocked: {p['reason']}"
    if p["retryAt"] is not None:
        text += f" (retries at {_at(p['retryAt'])}; `pokeralphctl battle resume` retries now)"
    return text


def _escalated(p: dict[str, Any]) -> str:
    escalation = p["escalation"]
    delivery = escalation.get("deliveryId")
    text = f"escalated: {shorten(escalation['message'])}"
    return text + (f"; answer with `pokeralphctl inbox show {delivery}`" if delivery else "")


def _progress(p: dict[str, Any]) -> str:
    # progress.json's fields but taskId have defaults: its schema lets them be left out
    progress = p["progress"]
    parts = [str(progress["status"])] if progress.get("status") is not None else []
    if progress.get("currentIteration") is not None:
        parts.append(f"iteration {progress['currentIteration']}")
    return ", ".join(parts) or "updated"


def _feedback_result(p: dict[str, Any]) -> str:
    result = p["result"]
    text = f"{p['loop']} " + ("passed" if result["passed"] else "failed")
    return text + (f" ({duration(result['duration'])})" if result.get("duration") else "")


def _scheduled(p: dict[str, Any]) -> str:
    parts = [f"started {', '.join(p['started']) or 'none'}"]
    if p["waiting"]:
        parts.append(f"waiting {', '.join(p['waiting'])}")
    refused: dict[str, str] = p.get("refused") or {}
    parts.extend(f"refused {task} ({why})" for task, why in refused.items())
    return "; ".join(parts) + ("; all done" if p.get("done") else "")


def _merge_failed(p: dict[str, Any]) -> str:
    text = f"merging {p['branch']} into {p['into']} refused: {shorten(p['message'])}"
    files: list[str] = p["files"]
    return text + (
        f" ({_plural(len(files), 'file')}: {shorten(', '.join(files), 80)})" if files else ""
    )


def _decided(p: dict[str, Any]) -> str:
    text = f"{p['tool']} {'allowed' if p['allowed'] else 'denied'} ({p['method']}"
    text += f", rule {p['ruleId']})" if p.get("ruleId") else ")"
    return text + (f": {shorten(p['message'])}" if p.get("message") else "")


def _refused(p: dict[str, Any]) -> str:
    pid = f" (pid {p['pid']})" if p.get("pid") is not None else ""
    return f"refused {p['method']} from a {p['kind']} agent{pid}: {shorten(p['reason'])}"


def _notify_failed(p: dict[str, Any]) -> str:
    text = f"{p['channel']} notification ({', '.join(p['kinds'])}) given up after "
    return text + f"{_plural(p['attempts'], 'attempt')}: {shorten(p['error'])}"


SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "phase_changed": lambda p: (
        f"phase {p['previous']} -> {p['phase']}"
        + (f" (cycle {p['cycle']})" if p["cycle"] is not None else "")
        + f": {p['reason']}"
    ),
    "verification_report": lambda p: "verification " + _report(p, p["criteria"]),
    "review_report": lambda p: "review " + _report(p, None),
    "battle_blocked": _blocked,
    "battle_escalated": _escalated,
    "escalation_resolved": lambda p: (
        f"escalation {p['escalation']} answered: {p['action']}"
        + (f" ({shorten(p['guidance'], 100)})" if p["guidance"] else "")
    ),
    "battle_start": lambda p: (
        f"battle started ({p['mode']}"
        + (f", at most {_plural(p['maxIterations'], 'iteration')}" if p["maxIterations"] else "")
        + ")"
    ),
    "battle_queued": lambda p: f"queued at position {p['position']}",
    "battle_resumed": _resumed,
    "battle_paused": _paused,
    "battle_cancelled": lambda p: f"cancelled after {_plural(p['iterations'], 'iteration')}",
    "battle_complete": lambda p: (
        f"complete after {_plural(p['iterations'], 'iteration')}, {money(p['costUsd'])}"
    ),
    "battle_failed": lambda p: (
        f"failed after {_plural(p['iterations'], 'iteration')}: {shorten(p['error'])}"
    ),
    "battle_reverted": lambda p: f"reverted {p['commitHash'][:8]}: {p['title']}",
    "worktree_created": lambda p: (
        f"worktree {p['path']} on branch {p['branch']} (from {p['from']})"
    ),
    "worktree_removed": lambda p: (
        f"worktree {p['path']} removed"
        + (f", branch {p['branch']} kept" if p["branchKept"] else "")
    ),
    "battle_merged": lambda p: (
        f"merged {p['branch']} into {p['into']}" + (f" at {p['commit'][:8]}" if p["commit"] else "")
    ),
    "merge_failed": _merge_failed,
    "battles_scheduled": _scheduled,
    "iteration_start": lambda p: (
        f"iteration {p['iteration']}"
        + (f"/{p['maxIterations']}" if p["maxIterations"] else "")
        + " started"
    ),
    "iteration_end": _iteration_end,
    "progress_update": _progress,
    "feedback_result": _feedback_result,
    "permission_requested": lambda p: (
        f"iteration {p['iteration']} asks to run {p['tool']}: {shorten(p['input'], 100)}"
    ),
    "permission_decided": _decided,
    "agent_refused": _refused,
    "budget_exceeded": lambda p: (
        f"budget {p['cap']} {money(p['limitUsd'])} reached ({money(p['spentUsd'])} spent, "
        f"next run {money(p['nextUsd'])}): {shorten(p['reason'])}"
    ),
    "await_approval": lambda p: (
        f"iteration {p['iteration']} ({p['result']}) awaits "
        "approval: `pokeralphctl battle approve` (or --reject)"
    ),
    "await_approval_delivery": lambda p: (
        f"iteration {p['iteration']} awaits approval in the inbox ({p['deliveryId']})"
    ),
    "approval_received": _approval,
    "notice": lambda p: p["message"],
    "notify_failed": _notify_failed,
    "task_created": lambda p: f"created: {p['task']['title']}",
    "task_updated": _task_updated,
    "task_deleted": lambda p: "deleted",
    "config_updated": lambda p: (
        "config " + (", ".join(_flat(p["patch"])) if p["patch"] else "updated")
    ),
    "prd_updated": lambda p: f"PRD {p['prd']['name']!r} saved (version {p['version']})",
    "repo_registered": lambda p: f"registered at {p['path']}",
    "repo_unregistered": lambda p: f"unregistered ({p['path']})",
    "new_delivery": lambda p: (
        f"inbox: {p['delivery']['title']} (`pokeralphctl inbox show {p['id']}`)"
    ),
    "feedback_received": _answered,
    "delivery_timeout": lambda p: f"inbox item {p['id']} timed out",
    "delivery_closed": lambda p: (
        f"inbox item {p['id']} closed" + (f": {p['reason']}" if p["reason"] else "")
    ),
    "annotation_added": lambda p: f"annotation on inbox item {p['id']}",
    "planning_reset": lambda p: "planning session reset",
    "planning_question": lambda p: f"question: {shorten(p['question'])}",
    "planning_completed": lambda p: "plan ready" + ("" if p["valid"] else " (with problems)"),
    "planning_failed": lambda p: f"planning failed: {shorten(p['error'])}",
    "debug": lambda p: f"#{p['i']}",
}

#: shown only with -v
VERBOSE_ONLY = frozenset({"progress_update"})
TYPE_STYLES = {
    "battle_complete": "green",
    "battle_failed": "red",
    "battle_cancelled": "yellow",
    "battle_paused": "yellow",
    "await_approval": "magenta",
    "battle_blocked": "yellow",
    "battle_escalated": "magenta",
    "phase_changed": "blue",
}


def chunk_lines(chunks: list[dict[str, str]], verbose: int) -> list[tuple[str, str]]:
    """``(text, style)`` lines of an output event's chunks."""
    lines: list[tuple[str, str]] = []
    for chunk in chunks:
        kind, text = chunk["kind"], clean(chunk["text"], multiline=True)
        if kind == "text":
            lines.extend((line, "") for line in text.splitlines() if line.strip())
        elif kind == "tool_use":
            lines.append((f"→ {shorten(text)}", "cyan"))
        elif kind == "tool_error":
            lines.append((f"✗ {shorten(text)}", "red"))
        elif kind == "notice":
            lines.append((shorten(text), "yellow"))
        elif verbose and kind == "tool_result":
            lines.append((f"← {shorten(text)}", "dim"))
        elif verbose and kind == "stderr":
            lines.extend((line, "dim") for line in text.splitlines() if line.strip())
    return lines


def task_of(event: dict[str, Any]) -> str:
    """The event's task: the envelope's ``taskId`` (every task's event has one), else the
    task a ``task_created`` carries."""
    task_id = event.get("taskId")  # optional in the envelope
    if task_id is None and event["type"] == "task_created":
        task_id = event["payload"]["task"]["id"]
    return "-" if task_id is None else str(task_id)


def render(out: Output, event: dict[str, Any], *, prefix: bool = True) -> list[str]:
    """The human lines of one event (none for events hidden at this verbosity).

    An event without the shape of its type (a newer or a broken daemon's) is shown as
    its type and its JSON, as an event of a type this client does not know is: reading
    it never ends a ``watch`` or a ``follow``.
    """
    try:
        return _render(out, event, prefix)
    except SHAPE_ERRORS:
        return [_line(out, event, prefix, str(event.get("type")), _as_json(event.get("payload")))]


def _render(out: Output, event: dict[str, Any], prefix: bool) -> list[str]:
    kind: str = event["type"]
    payload: dict[str, Any] = event["payload"]
    if kind in VERBOSE_ONLY and not out.verbose:
        return []
    if kind in ("iteration_output", "planning_output"):
        label = out.style(clean(payload.get("phase") or "output"), "dim")  # a phase's only
        head = _head(out, event) if prefix else ""
        return [
            f"{head} {label} {out.style(text, style) if style else text}".lstrip()
            for text, style in chunk_lines(payload["chunks"], out.verbose)
        ]
    summary = SUMMARIES.get(kind)
    text = summary(payload) if summary else _as_json(payload)
    return [_line(out, event, prefix, kind, text)]


def _as_json(payload: Any) -> str:
    return shorten(dumps(payload))


def _head(out: Output, event: dict[str, Any]) -> str:
    """``HH:MM:SS repo task``."""
    return " ".join(
        [
            out.style(clock(event["timestamp"]), "dim"),
            out.style(clean(event["repo"] or "-"), "bold"),
            clean(task_of(event)),
        ]
    )


def _line(out: Output, event: dict[str, Any], prefix: bool, kind: str, text: str) -> str:
    head = ""
    if prefix:
        try:
            head = _head(out, event)
        except SHAPE_ERRORS:  # an envelope without its shape: its own JSON says what it is
            head = "--:--:-- - -"
    label = out.style(clean(kind), TYPE_STYLES.get(kind, "cyan"))
    return f"{head} {label} {clean(text)}".lstrip()
