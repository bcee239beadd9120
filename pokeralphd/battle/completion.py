"""Completion signals in the agent's own words: the sigil ``<promise>COMPLETE</promise>``
or the original PokéRalph's ``<completion>{JSON}</completion>`` block.

The caller passes only the agent's own text (assistant text, the final result), never tool
results: those echo files and the prompt, which mentions the sigil. A sigil quoted inside
the agent's own sentence still counts; we cannot tell intent, and the feedback loops still
have to pass.

Each text is read on its own (a message; a plain-text agent's lines come as one text, see
:func:`~pokeralphd.battle.judging.agent_words`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from pokeralphd.domain.models import CompletionSignal

SIGIL = "<promise>COMPLETE</promise>"
BLOCK_RE = re.compile(r"<completion>\s*(.*?)\s*</completion>", re.DOTALL | re.IGNORECASE)
FENCE_RE = re.compile(r"^```(?:json)?\s*|\s*```$")


def _blocks(texts: list[str]) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Every block in order: (parsed, None) or (None, why it was ignored)."""
    out: list[tuple[dict[str, Any] | None, str | None]] = []
    for raw in (raw for text in texts for raw in BLOCK_RE.findall(text)):
        body = FENCE_RE.sub("", raw.strip())
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            out.append(
                (
                    None,
                    f"the <completion> block is not valid JSON ({exc.msg} at line {exc.lineno})",
                )
            )
            continue
        if not isinstance(data, dict):
            out.append((None, "the <completion> block must hold a JSON object"))
            continue
        out.append((data, None))
    return out


def _signal(
    data: dict[str, Any], task_id: str | None
) -> tuple[CompletionSignal | None, str | None]:
    if data.get("type") != "BATTLE_COMPLETE":
        return None, f"the <completion> block has type {data.get('type')!r}, not 'BATTLE_COMPLETE'"
    if task_id and data.get("taskId") not in (None, task_id):
        return None, f"the <completion> block names task {data.get('taskId')!r}, not {task_id!r}"
    try:
        signal = CompletionSignal.model_validate(
            {
                "kind": "block",
                "summary": data.get("summary"),
                "acceptanceCriteriaMet": data.get("acceptanceCriteriaMet") or [],
                "filesChanged": data.get("filesChanged") or [],
                "testsAdded": data.get("testsAdded") or [],
                "confidence": data.get("confidence"),
                "notes": data.get("notes"),
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return None, f"the <completion> block is malformed at {where}: {err['msg']}"
    return signal, None


def detect_completion(texts: list[str], task_id: str | None = None) -> CompletionSignal | None:
    """The last valid completion block, else the sigil, else None."""
    found: CompletionSignal | None = None
    for data, _ in _blocks(texts):
        if data is not None:
            signal, _problem = _signal(data, task_id)
            if signal is not None:
                found = signal
    if found is not None:
        return found
    if any(SIGIL in text for text in texts):
        return CompletionSignal(kind="sigil")
    return None


def completion_problems(texts: list[str], task_id: str | None = None) -> list[str]:
    """Why completion blocks were ignored (for the next prompt)."""
    problems = []
    for data, problem in _blocks(texts):
        if problem:
            problems.append(problem)
        elif data is not None:
            why = _signal(data, task_id)[1]
            if why:
                problems.append(why)
    return problems
