"""What the verifier (seed 003's QA agent) and the reviewer are told.

Each sees the task and its acceptance criteria, the battle's diff (the commit the battle
started from to HEAD), the feedback loops' results of the last implementation iteration,
and what its own earlier reports asked for; it must answer with one JSON report between
tags (see :mod:`pokeralphd.battle.reports`). The first line names the role, so a person
reading a log (or a scripted agent) can tell the runs apart. Bounded like the
implementer's prompt: the diff is trimmed first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from pokeralphd.battle.prompt import summarize_prd, trim_tail

if TYPE_CHECKING:
    from pokeralphd.domain.models import PRD, Battle, FeedbackResult, Task

MAX_DIFF = 48 * 1024
Role = Literal["verification", "review"]
ROLE_NAME = {"verification": "verifier", "review": "reviewer"}


def _criteria(task: Task) -> str:
    return "\n".join(f"{n}. {c}" for n, c in enumerate(task.acceptance_criteria, 1))


def _loops(results: dict[str, FeedbackResult]) -> str:
    if not results:
        return "No feedback loop ran after the last iteration."
    lines = []
    for name, result in results.items():
        state = "skipped" if result.skipped else ("passed" if result.passed else "FAILED")
        command = f" (`{result.command}`)" if result.command else ""
        lines.append(f"- {name}{command}: {state}")
        if not result.passed and not result.skipped:
            lines += ["```", trim_tail(result.output, 20, 1500), "```"]
    return "\n".join(lines)


def _diff(stat: str, diff: str) -> str:
    body = diff
    if len(body.encode()) > MAX_DIFF:
        body = body.encode()[:MAX_DIFF].decode("utf-8", errors="ignore")
        body += "\n[… the diff is longer; read the files themselves …]"
    return "\n".join(["```", stat.strip() or "(no changes)", "```", "", "```diff", body, "```"])


def _earlier(battle: Battle, role: Role) -> str:
    cycles = battle.verification if role == "verification" else battle.review
    if not cycles.reports:
        return ""
    lines = [f"## Your earlier {ROLE_NAME[role]} reports in this battle"]
    for summary in cycles.reports[-3:]:
        what = summary.problem or summary.summary or "(no summary)"
        lines.append(f"- cycle {summary.cycle}: {summary.outcome} — {' '.join(what.split())[:400]}")
    last = cycles.reports[-1]
    if last.outcome == "invalid":
        lines += [
            "",
            f"Your last report could not be used: {last.problem}. Answer with exactly one "
            "report in the format below.",
        ]
    return "\n".join(lines)


VERIFICATION_TEMPLATE = {
    "testResults": {
        "summary": {"passed": 0, "failed": 0, "skipped": 0, "total": 0},
        "failures": [{"name": "test name", "error": "what failed", "file": "path", "line": 1}],
        "commands": [{"command": "the test command you ran", "passed": True, "exitCode": 0}],
    },
    "acceptanceCriteria": [
        {
            "id": 1,
            "criterion": "the criterion's text, as listed",
            "status": "passed | failed | blocked",
            "evidence": "what you ran or read that shows it",
        }
    ],
    "recommendation": "approve | request_changes",
    "feedback": {
        "priority": "low | medium | high | critical",
        "summary": "one or two sentences",
        "items": [
            {
                "severity": "critical | major | minor | info",
                "description": "what is wrong",
                "file": "path",
                "line": 1,
                "suggestion": "how to fix it",
            }
        ],
    },
}

REVIEW_TEMPLATE = {
    "assessment": "approve | request_changes | comment",
    "comments": [
        {
            "id": "R001",
            "severity": "critical | major | minor | info",
            "blocking": True,
            "file": "path",
            "line": 1,
            "issue": "what is wrong",
            "suggestion": "how to fix it",
            "category": "correctness | security | maintainability | tests | style",
        }
    ],
    "security": {"vulnerabilitiesFound": 0, "items": []},
    "feedback": {"blockingCount": 0, "suggestionCount": 0, "message": "what to do first"},
}


def build_role_prompt(
    role: Role,
    prd: PRD,
    task: Task,
    battle: Battle,
    cycle: int,
    limit: int,
    stat: str,
    diff: str,
    loops: dict[str, FeedbackResult],
) -> str:
    name = ROLE_NAME[role]
    base = battle.base_commit[:12] if battle.base_commit else "the empty tree"
    if role == "verification":
        duty = (
            "You are the QA engineer of this project. Verify, independently, that the work "
            "below meets every acceptance criterion of the task: read the change, run the "
            "tests (and any check a criterion needs), and judge each criterion on evidence, "
            "not on the implementer's word."
        )
        tag, template = "verification-report", VERIFICATION_TEMPLATE
        rules = [
            "- Report on every acceptance criterion, by its number and text: `passed` when "
            "it is met, `failed` when it is not, `blocked` when you could not test it.",
            "- Recommend `approve` only when every criterion passed; otherwise "
            "`request_changes`, with findings the implementer can act on.",
        ]
    else:
        duty = (
            "You are the code reviewer of this project. Review the change below for "
            "correctness, security, tests and maintainability, as you would a pull request."
        )
        tag, template = "review-report", REVIEW_TEMPLATE
        rules = [
            "- Mark a comment `blocking: true` only when the change must not be accepted "
            "without fixing it; suggestions are not blocking.",
            "- Assess `request_changes` when any comment is blocking, else `approve` (or "
            "`comment` when you only have suggestions).",
        ]
    sections = [
        f"Role: {name} (pokeralph {role}, cycle {cycle} of {limit})",
        duty,
        summarize_prd(prd, task.id),
        "\n".join(
            [
                "## The task",
                "",
                f"Task ID: {task.id}",
                f"Title: {task.title}",
                "",
                task.description.strip(),
                "",
                "### Acceptance criteria",
                _criteria(task),
            ]
        ),
        "## Feedback loops after the last implementation iteration\n\n" + _loops(loops),
        f"## The change (git diff {base}..HEAD)\n\n" + _diff(stat, diff),
    ]
    earlier = _earlier(battle, role)
    if earlier:
        sections.append(earlier)
    sections.append(
        "\n".join(
            [
                "## How to work",
                "",
                "- Do not change any file, and do not commit: you judge the work, the "
                "implementer changes it. Whatever you change in the working tree is put "
                "back after your run.",
                "- Do not touch the `.pokeralph/` folder.",
                *rules,
                "",
                "## Your answer",
                "",
                f"End with exactly one report, as JSON between <{tag}> tags, in this shape:",
                "",
                f"<{tag}>" + json.dumps(template, indent=2) + f"</{tag}>",
                "",
                "A report that is missing, is not valid JSON, or leaves a criterion out "
                "counts as a failed " + role + ".",
            ]
        )
    )
    return "\n\n".join(sections) + "\n"
