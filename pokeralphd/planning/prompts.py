"""The planning and breakdown prompts: ask questions in ``<question>`` blocks while the
idea is unclear, and finish with the PRD in one ``<prd>{JSON}</prd>`` block."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralphd.domain.models import PRD

PRD_SHAPE = {
    "name": "Short project name",
    "description": "What the project is and why, in a paragraph",
    "tasks": [
        {
            "title": "Imperative title of one task",
            "description": "What to build, precisely enough for a coding agent",
            "acceptanceCriteria": ["a checkable statement", "another"],
            "priority": 1,
        }
    ],
}

PROTOCOL = f"""
## How to answer (the tool reading you parses these forms exactly)

- While something essential is unclear, ask. Put each question in its own block:
  <question>Which database should it use: PostgreSQL or SQLite?</question>
  Ask at most three questions per turn, then stop and wait for the answers.
- When you know enough, end your final turn with the whole PRD as JSON in one block:
  <prd>{json.dumps(PRD_SHAPE, indent=2)}</prd>
  Every task needs a title, a description, at least one acceptance criterion and a priority
  (1 is the most important). Order tasks so each builds on the ones before. Ids are
  generated for you: do not invent them.
- Do not write code or change files: this is planning only.
"""


def build_planning_prompt(idea: str, context: str = "") -> str:
    parts = [
        "You are planning a software project with a person. Turn their idea into a PRD: a",
        "short description and a list of small, independently verifiable tasks that a coding",
        "agent can complete one at a time.",
        "",
        "## The idea",
        "",
        idea.strip(),
    ]
    if context:
        parts += ["", "## The repository today", "", context.strip()]
    return "\n".join(parts) + "\n" + PROTOCOL


def build_breakdown_prompt(prd: PRD) -> str:
    existing = "\n".join(f"- {t.id}: {t.title}" for t in prd.tasks) or "(none)"
    return (
        "Break this project down into tasks a coding agent can complete one at a time.\n\n"
        f"## Project: {prd.name}\n\n{prd.description.strip()}\n\n"
        f"## Tasks that already exist (do not repeat them)\n\n{existing}\n" + PROTOCOL
    )


def build_answer_prompt(answer: str) -> str:
    return (
        "Answers to your questions:\n\n"
        + answer.strip()
        + "\n\nAsk more questions in <question> blocks if something essential is still unclear;"
        " otherwise finish with the complete PRD in a <prd> block."
    )
