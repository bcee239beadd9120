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


def _feedback(results: Any) -> str:
    if not isinstance(results, dict) or not results:
        return ""
    return " ".join(f"{loop} {'ok' if passed else 'FAILED'}" for loop, passed in results.items())


def _iteration_end(p: dict[str, Any]) -> str:
    parts = [f"iteration {p.get('iteration')}: {p.get('result')}"]
    parts.append(duration(p.get("durationMs")))
    if p.get("costUsd") is not None:
        parts.append(f"{money(p['costUsd'])} (battle {money(p.get('battleCostUsd'))})")
    files = p.get("filesChanged") or []
    parts.append(f"{len(files)} file{'s' if len(files) != 1 else ''}")
    if p.get("commitHash"):
        parts.append(f"commit {str(p['commitHash'])[:8]}")
    if feedback := _feedback(p.get("feedback")):
        parts.append(feedback)
    text = ", ".join(parts)
    return f"{text}; error: {shorten(str(p['error']))}" if p.get("error") else text


def _paused(p: dict[str, Any]) -> str:
    text = f"paused: {p.get('reason')}"
    if p.get("recovered"):
        text += " (found running after a daemon restart)"
    if p.get("rateLimitedUntil"):
        until = datetime.fromtimestamp(float(p["rateLimitedUntil"])).strftime("%H:%M:%S")
        text += f" (rate limited until {until})"
    return text + "; resume with `pokeralphctl battle resume`"


def _task_updated(p: dict[str, Any]) -> str:
    task = p.get("task") or {}
    changed = p.get("changed") or []
    if "status" in changed:
        return f"status -> {task.get('status')}" + (
            f" ({', '.join(c for c in changed if c != 'status')})" if len(changed) > 1 else ""
        )
    return "changed " + ", ".join(changed)


def _resumed(p: dict[str, Any]) -> str:
    text = "resumed"
    if p.get("iteration"):
        text += f" at iteration {p['iteration']}"
    return text + (f" ({p['reason']})" if p.get("reason") else "")


def _approval(p: dict[str, Any]) -> str:
    text = f"iteration {p.get('iteration')} {'approved' if p.get('approved') else 'rejected'}"
    return text + (f": {shorten(str(p['note']))}" if p.get("note") else "")


def _answered(p: dict[str, Any]) -> str:
    feedback = p.get("feedback") or {}
    text = f"inbox item {p.get('id')} answered: {dumps(feedback.get('values'))}"
    return text + (f" ({shorten(str(feedback['note']))})" if feedback.get("note") else "")


def _at(epoch: Any) -> str:
    try:
        return datetime.fromtimestamp(float(epoch)).strftime("%H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _report(p: dict[str, Any]) -> str:
    """A verification or review report in a line (seed 003)."""
    head = f"cycle {p.get('cycle')}/{p.get('maxCycles')}: "
    if not p.get("valid"):
        return head + f"unusable report ({shorten(str(p.get('problem')))})"
    text = head + str(p.get("outcome")) + (" (passed)" if p.get("passed") else "")
    counts = p.get("criteria")
    if isinstance(counts, dict):
        text += f", criteria {counts.get('passed')} passed, {counts.get('failed')} failed"
        text += f", {counts.get('blocked')} blocked"
    else:
        text += f", {p.get('findings')} comments ({p.get('blocking')} blocking)"
    return text + (f"; {shorten(str(p['summary']), 100)}" if p.get("summary") else "")


def _blocked(p: dict[str, Any]) -> str:
    text = f"blocked: {p.get('reason')}"
    if p.get("retryAt"):
        text += f" (retries at {_at(p['retryAt'])}; `pokeralphctl battle resume` retries now)"
    return text


def _escalated(p: dict[str, Any]) -> str:
    escalation = p.get("escalation") or {}
    delivery = escalation.get("deliveryId")
    text = f"escalated: {shorten(str(escalation.get('message')))}"
    return text + (f"; answer with `pokeralphctl inbox show {delivery}`" if delivery else "")


SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "phase_changed": lambda p: (
        f"phase {p.get('previous')} -> {p.get('phase')}"
        + (f" (cycle {p['cycle']})" if p.get("cycle") else "")
        + f": {p.get('reason')}"
    ),
    "verification_report": lambda p: "verification " + _report(p),
    "review_report": lambda p: "review " + _report(p),
    "battle_blocked": _blocked,
    "battle_escalated": _escalated,
    "escalation_resolved": lambda p: (
        f"escalation {p.get('escalation')} answered: {p.get('action')}"
        + (f" ({shorten(str(p['guidance']), 100)})" if p.get("guidance") else "")
    ),
    "battle_start": lambda p: (
        f"battle started ({p.get('mode')}, at most {p.get('maxIterations') or '?'} iterations)"
    ),
    "battle_queued": lambda p: f"queued at position {p.get('position')}",
    "battle_resumed": _resumed,
    "battle_paused": _paused,
    "battle_cancelled": lambda p: f"cancelled after {p.get('iterations')} iterations",
    "battle_complete": lambda p: (
        f"complete after {p.get('iterations')} iterations, {money(p.get('costUsd'))}"
    ),
    "battle_failed": lambda p: (
        f"failed after {p.get('iterations')} iterations: {shorten(str(p.get('error')))}"
    ),
    "battle_reverted": lambda p: f"reverted {str(p.get('commitHash'))[:8]}: {p.get('title')}",
    "iteration_start": lambda p: (
        f"iteration {p.get('iteration')}"
        + (f"/{p['maxIterations']}" if p.get("maxIterations") else "")
        + " started"
    ),
    "iteration_end": _iteration_end,
    "progress_update": lambda p: (
        f"{(p.get('progress') or {}).get('status')}, iteration "
        f"{(p.get('progress') or {}).get('currentIteration')}"
    ),
    "feedback_result": lambda p: (
        f"{p.get('loop')} "
        + ("passed" if (p.get("result") or {}).get("passed") else "failed")
        + f" ({duration((p.get('result') or {}).get('duration'))})"
    ),
    "await_approval": lambda p: (
        f"iteration {p.get('iteration')} ({p.get('result')}) awaits "
        "approval: `pokeralphctl battle approve` (or --reject)"
    ),
    "await_approval_delivery": lambda p: (
        f"iteration {p.get('iteration')} awaits approval in the inbox ({p.get('deliveryId')})"
    ),
    "approval_received": _approval,
    "notice": lambda p: str(p.get("message")),
    "task_created": lambda p: f"created: {(p.get('task') or {}).get('title')}",
    "task_updated": _task_updated,
    "task_deleted": lambda p: "deleted",
    "config_updated": lambda p: (
        "config " + (", ".join(_flat(p.get("patch"))) if p.get("patch") else "updated")
    ),
    "prd_updated": lambda p: (
        f"PRD {(p.get('prd') or {}).get('name')!r} saved (version {p.get('version')})"
    ),
    "repo_registered": lambda p: f"registered at {p.get('path')}",
    "repo_unregistered": lambda p: f"unregistered ({p.get('path')})",
    "new_delivery": lambda p: (
        f"inbox: {(p.get('delivery') or {}).get('title')} (`pokeralphctl inbox show {p.get('id')}`)"
    ),
    "feedback_received": _answered,
    "delivery_timeout": lambda p: f"inbox item {p.get('id')} timed out",
    "delivery_closed": lambda p: (
        f"inbox item {p.get('id')} closed" + (f": {p['reason']}" if p.get("reason") else "")
    ),
    "annotation_added": lambda p: f"annotation on inbox item {p.get('id')}",
    "planning_reset": lambda p: "planning session reset",
    "planning_question": lambda p: f"question: {shorten(str(p.get('question')))}",
    "planning_completed": lambda p: "plan ready" + ("" if p.get("valid") else " (with problems)"),
    "planning_failed": lambda p: f"planning failed: {shorten(str(p.get('error')))}",
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


def chunk_lines(chunks: Any, verbose: int) -> list[tuple[str, str]]:
    """``(text, style)`` lines of an output event's chunks."""
    lines: list[tuple[str, str]] = []
    for chunk in chunks if isinstance(chunks, list) else []:
        kind, text = chunk.get("kind"), clean(chunk.get("text", ""), multiline=True)
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
    """The event's task: the envelope's ``taskId``, else the one its payload names."""
    payload = event.get("payload") or {}
    task = payload.get("task")
    task_id = task.get("id") if isinstance(task, dict) else None
    return str(event.get("taskId") or payload.get("taskId") or task_id or "-")


def render(out: Output, event: dict[str, Any], *, prefix: bool = True) -> list[str]:
    """The human lines of one event (none for events hidden at this verbosity)."""
    kind = str(event.get("type"))
    payload = event.get("payload") or {}
    if kind in VERBOSE_ONLY and not out.verbose:
        return []
    head = ""
    if prefix:
        head = " ".join(
            [
                out.style(clock(event.get("timestamp")), "dim"),
                out.style(clean(event.get("repo") or "-"), "bold"),
                clean(task_of(event)),
            ]
        )
    if kind in ("iteration_output", "planning_output"):
        label = out.style(clean(payload.get("phase") or "output"), "dim")
        return [
            f"{head} {label} {out.style(text, style) if style else text}".lstrip()
            for text, style in chunk_lines(payload.get("chunks"), out.verbose)
        ]
    summary = SUMMARIES.get(kind)
    text = clean(summary(payload) if summary else shorten(dumps(payload)))
    label = out.style(clean(kind), TYPE_STYLES.get(kind, "cyan"))
    return [f"{head} {label} {text}".lstrip()]
