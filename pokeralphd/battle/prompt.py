"""PromptBuilder: what an iteration's agent is told.

The PRD in summary, the task and its acceptance criteria, what earlier iterations did and
which feedback loops failed (trimmed output), the reviewer's note, and the completion
protocol. Bounded in size: the biggest parts are trimmed first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralphd.domain.models import PRD, Findings, Iteration, Task

SIGIL = "<promise>COMPLETE</promise>"
MAX_PROMPT = 24 * 1024
FINDINGS_CHARS = 7000  # kept near the prompt's end, which shrinking keeps
LOOP_TAIL_LINES = 40
LOOP_TAIL_CHARS = 3000


def trim_tail(text: str, lines: int = LOOP_TAIL_LINES, chars: int = LOOP_TAIL_CHARS) -> str:
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    if len(kept) > chars:
        kept = "[…]\n" + kept[-chars:]
    return kept


def summarize_prd(prd: PRD, current: str | None = None, max_tasks: int = 40) -> str:
    description = prd.description.strip()
    if len(description) > 1500:
        description = description[:1500] + " […]"
    lines = [f"# Project: {prd.name}", "", description, "", "## Tasks"]
    for task in prd.tasks[:max_tasks]:
        marker = " ← this task" if task.id == current else ""
        lines.append(f"- {task.id}: {task.title} [{task.status.value}]{marker}")
    if len(prd.tasks) > max_tasks:
        lines.append(f"- … and {len(prd.tasks) - max_tasks} more")
    return "\n".join(lines)


def _history(history: list[Iteration], limit: int = 5) -> str:
    if not history:
        return "This is the first iteration."
    lines = []
    for it in history[-limit:]:
        line = f"- Iteration {it.number}: {it.result.value}"
        if it.output:
            line += " — " + " ".join(it.output.split())[:300]
        if it.files_changed:
            line += f" (changed: {', '.join(it.files_changed[:10])})"
        if it.error:
            line += f" ERROR: {' '.join(it.error.split())[:300]}"
        lines.append(line)
    return "\n".join(lines)


def _failed_loops(history: list[Iteration]) -> str:
    if not history:
        return ""
    latest = history[-1]
    failed = [
        (name, r) for name, r in latest.feedback_results.items() if not r.passed and not r.skipped
    ]
    if not failed:
        return ""
    parts = [f"## Feedback loops that failed after iteration {latest.number}"]
    for name, result in failed:
        command = f" (`{result.command}`)" if result.command else ""
        parts += ["", f"### {name}{command}", "```", trim_tail(result.output), "```"]
    return "\n".join(parts)


def _findings(findings: Findings) -> str:
    """What the last verification or review asked for (seed 003's feedback routed to the
    implementer)."""
    who = "verifier (QA)" if findings.phase == "verification" else "code reviewer"
    lines = [
        f"## Changes the {who} asked for ({findings.phase} cycle {findings.cycle})",
        "",
        "Your earlier completion was not accepted. Fix these, then claim completion again:",
    ]
    if findings.summary:
        lines += ["", findings.summary.strip()[:1500]]
    lines.append("")
    for item in findings.items[:30]:
        where = ""
        if item.file:
            where = f" ({item.file}" + (f":{item.line}" if item.line else "") + ")"
        line = f"- [{item.severity}]{where} {' '.join(item.description.split())[:600]}"
        if item.suggestion:
            line += f" — suggestion: {' '.join(item.suggestion.split())[:400]}"
        if sum(map(len, lines)) + len(line) > FINDINGS_CHARS:
            lines.append(f"- … and more: {len(findings.items)} findings in all")
            break
        lines.append(line)
    return "\n".join(lines)


def build_task_prompt(
    prd: PRD,
    task: Task,
    iteration: int,
    max_iterations: int,
    history: list[Iteration],
    approval_note: str | None,
    completion_problems: list[str],
    feedback_loops: list[str],
    *,
    findings: Findings | None = None,
    guidance: str | None = None,
) -> str:
    criteria = "\n".join(f"{n}. {c}" for n, c in enumerate(task.acceptance_criteria, 1))
    block = {
        "type": "BATTLE_COMPLETE",
        "version": 1,
        "taskId": task.id,
        "summary": "what you did, in two sentences",
        "acceptanceCriteriaMet": [
            {
                "criterion": c,
                "met": True,
                "evidence": "how you know: a test, a command's output, a file",
            }
            for c in task.acceptance_criteria
        ],
        "filesChanged": ["path/relative/to/the/repo"],
        "testsAdded": ["tests you added, if any"],
        "confidence": 0.9,
        "notes": "anything the reviewer should know",
    }
    sections = [
        "You are working on one task of a software project, in a loop: each iteration you are "
        "started fresh with this prompt, so the repository and this prompt are your memory.",
        summarize_prd(prd, task.id),
        "\n".join(
            [
                "## Your task",
                "",
                f"Task ID: {task.id}",
                f"Title: {task.title}",
                f"Iteration: {iteration} of {max_iterations}",
                "",
                task.description.strip(),
                "",
                "### Acceptance criteria",
                criteria,
            ]
        ),
        "## What earlier iterations did\n\n" + _history(history),
    ]
    failed = _failed_loops(history)
    if failed:
        sections.append(failed)
    if completion_problems:
        sections.append(
            "## Why the last completion claim was not accepted\n\n"
            + "\n".join(f"- {p}" for p in completion_problems)
        )
    if findings is not None:
        sections.append(_findings(findings))
    if guidance:
        sections.append(
            "## Guidance from a person, after the battle was escalated (follow it)\n\n"
            + guidance.strip()[:4000]
        )
    if approval_note:
        sections.append("## Note from the reviewer (act on it)\n\n" + approval_note.strip())
    sections.append(
        "\n".join(
            [
                "## How to work",
                "",
                "- Make focused changes in this repository toward the acceptance criteria.",
                "- Do not commit: pokeralph commits each iteration's changes for you.",
                "- Do not touch the `.pokeralph/` folder.",
                "- After you finish, these feedback loops are run: "
                + (", ".join(feedback_loops) or "none")
                + ". Run them yourself first when you can.",
                "",
                "## When the task is complete",
                "",
                f"Only when every acceptance criterion is met and the feedback loops pass, print {SIGIL}",
                "and then this block, filled in, with evidence for each criterion:",
                "",
                "<completion>" + json.dumps(block, indent=2) + "</completion>",
                "",
                "Claiming completion while a feedback loop fails is rejected, and the next "
                "iteration is told why. If the task is not complete, say what is left instead.",
            ]
        )
    )
    prompt = "\n\n".join(sections) + "\n"
    if len(prompt.encode()) > MAX_PROMPT:
        prompt = _shrink(prompt)
    return prompt


def _shrink(prompt: str) -> str:
    """Keep the head (task) and the tail (protocol); cut the middle, which is history."""
    data = prompt.encode()
    head, tail = data[: MAX_PROMPT // 2], data[-(MAX_PROMPT // 2 - 100) :]
    return (
        head.decode("utf-8", errors="ignore")
        + "\n\n[… earlier context trimmed to keep the prompt small …]\n\n"
        + tail.decode("utf-8", errors="ignore")
    )
