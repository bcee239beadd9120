"""Reading a planning agent's answer: explicit ``<question>`` blocks and a ``<prd>{JSON}</prd>``
block, taken from the final turn only; and validating the PRD draft with reasons.

No guessing from question marks: the planning prompt asks for these exact forms.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from pokeralph_core.documents import first_error
from pokeralphd.domain.ids import next_task_id
from pokeralphd.domain.models import PRD, PRDMetadata, Task

QUESTION_RE = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL | re.IGNORECASE)
PRD_RE = re.compile(r"<prd>\s*(.*?)\s*</prd>", re.DOTALL | re.IGNORECASE)
FENCE_RE = re.compile(r"^```(?:json)?\s*|\s*```$")


def questions_in(text: str) -> list[str]:
    return [q.strip() for q in QUESTION_RE.findall(text) if q.strip()]


def prd_block(text: str) -> str | None:
    """The last ``<prd>`` block of ``text`` (JSON inside, fences tolerated), or None."""
    blocks = PRD_RE.findall(text)
    if not blocks:
        return None
    return str(FENCE_RE.sub("", blocks[-1].strip()))


def draft_from(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """Parse the PRD block: ``(draft, problems)``; problems when it is missing or not JSON."""
    raw = prd_block(text)
    if raw is None:
        return None, []
    try:
        draft = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, [
            f"the <prd> block is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ]
    if not isinstance(draft, dict):
        return None, ["the <prd> block must hold a JSON object"]
    return draft, []


def validate_draft(
    draft: dict[str, Any], idea: str | None
) -> tuple[PRD | None, list[dict[str, str]]]:
    """A PRD built from the draft (ids generated), or every problem found, by field."""
    problems: list[dict[str, str]] = []
    name = draft.get("name")
    description = draft.get("description")
    if not isinstance(name, str) or not name.strip():
        problems.append({"field": "name", "problem": "a non-empty project name is required"})
    if not isinstance(description, str) or not description.strip():
        problems.append({"field": "description", "problem": "a non-empty description is required"})
    raw_tasks = draft.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        problems.append({"field": "tasks", "problem": "at least one task is required"})
        raw_tasks = []
    tasks: list[Task] = []
    ids: list[str] = []
    for index, raw in enumerate(raw_tasks):
        where = f"tasks[{index}]"
        if not isinstance(raw, dict):
            problems.append({"field": where, "problem": "each task must be an object"})
            continue
        missing = [
            k for k in ("title", "description", "acceptanceCriteria", "priority") if k not in raw
        ]
        for key in missing:
            problems.append({"field": f"{where}.{key}", "problem": "required"})
        if missing:
            continue
        task_id = next_task_id(str(raw.get("title", "")), ids)
        data = {
            "id": task_id,
            "title": raw["title"],
            "description": raw["description"],
            "acceptanceCriteria": raw["acceptanceCriteria"],
            "priority": raw["priority"],
        }
        try:
            task = Task.model_validate(data)
        except ValidationError as exc:
            field, message = first_error(exc, where)
            problems.append({"field": field, "problem": message})
            continue
        ids.append(task_id)
        tasks.append(task)
    if problems:
        return None, problems
    prd = PRD(
        name=str(name).strip()[:200],
        description=str(description).strip(),
        tasks=tasks,
        metadata=PRDMetadata(
            version="1.0.0", generated_by="pokeralph planning", original_idea=idea
        ),
    )
    return prd, []
