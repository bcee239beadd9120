"""Reading a verification or review report out of what the agent said. Pure.

The role's prompt asks for the report as JSON between tags,
``<verification-report>{…}</verification-report>`` or ``<review-report>{…}</review-report>``,
in the agent's own words (assistant text and its final result, never tool output, which
echoes files and the prompt). A fenced ```json block holding the right keys is taken
too, as models often answer that way. The last report found wins.

A report that is missing, does not parse, does not fit the seed's shape, or leaves an
acceptance criterion out is returned with ``valid: false`` and the ``problem`` named: the
caller treats it as a failed verification (or review), never as an approval. A
verification that approves while a criterion is not passed is taken as asking for
changes: the criteria decide, not the verdict line.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from pokeralph_core.documents import first_error
from pokeralphd.domain.reports import (
    CriterionResult,
    ReportContext,
    ReviewReport,
    VerificationReport,
)

MAX_REPORT_CHARS = 256 * 1024
RAW_CHARS = 2000
TAGS = {"verification": "verification-report", "review": "review-report"}
KEYS = {"verification": "recommendation", "review": "assessment"}
FENCE_RE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _tag_re(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<{tag}>\s*(.*?)\s*</{tag}>", re.DOTALL | re.IGNORECASE)


def _candidates(texts: list[str], phase: Literal["verification", "review"]) -> list[str]:
    """Every report body the agent wrote, tagged ones first-class, in order (each text on
    its own: a plain-text agent's lines come as one, see ``judging.agent_words``)."""
    tagged = [body for text in texts for body in _tag_re(TAGS[phase]).findall(text)]
    if tagged:
        return [re.sub(r"^```(?:json)?\s*|\s*```$", "", b.strip()) for b in tagged]
    return [body for text in texts for body in FENCE_RE.findall(text) if f'"{KEYS[phase]}"' in body]


def extract(
    texts: list[str], phase: Literal["verification", "review"]
) -> tuple[dict[str, Any] | None, str | None]:
    """The last report object the agent wrote, or ``None`` and why there is none."""
    bodies = _candidates(texts, phase)
    if not bodies:
        return None, (f"no <{TAGS[phase]}> block in the agent's answer: the report is missing")
    body = bodies[-1]
    if len(body) > MAX_REPORT_CHARS:
        return None, f"the report is larger than {MAX_REPORT_CHARS // 1024} KiB"
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"the report is not valid JSON ({exc.msg} at line {exc.lineno})"
    if not isinstance(data, dict):
        return None, "the report must be a JSON object"
    return data, None


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


def match_criteria(
    reported: list[CriterionResult], criteria: list[str]
) -> tuple[list[CriterionResult], str | None]:
    """The task's criteria, each with what the report says of it (by number, else by its
    text), in the task's order; or the first criterion the report leaves out."""
    by_id = {c.id: c for c in reported if c.id is not None}
    by_text = {_norm(c.criterion): c for c in reported}
    out: list[CriterionResult] = []
    for number, criterion in enumerate(criteria, 1):
        found = by_text.get(_norm(criterion)) or by_id.get(number)
        if found is None:
            return reported, f"acceptance criterion {number} ({criterion!r}) is not in the report"
        out.append(found.model_copy(update={"id": number, "criterion": criterion}))
    return out, None


CONTEXT = frozenset(ReportContext.model_fields)
R = TypeVar("R", VerificationReport, ReviewReport)


def _validated(
    model: type[R], data: dict[str, Any], base: dict[str, Any]
) -> tuple[R | None, str | None]:
    # what the agent may fill: the report's own fields, never the context we record
    given = {k: v for k, v in data.items() if _snake(k) not in CONTEXT}
    try:
        return model.model_validate({**given, **base}), None
    except ValidationError as exc:
        where, message = first_error(exc)
        return None, f"the report does not fit its schema at {where}: {message}"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _invalid(model: type[R], base: dict[str, Any], problem: str, texts: list[str]) -> R:
    raw = "\n".join(t.strip() for t in texts if t.strip())[-RAW_CHARS:]
    return model.model_validate({**base, "valid": False, "problem": problem, "raw": raw})


def parse_verification(
    texts: list[str], criteria: list[str], base: dict[str, Any]
) -> VerificationReport:
    """The verification report in ``texts``; ``base`` holds the context fields (taskId,
    cycle, createdAt, commits, agent). Always a report: an invalid one says why."""
    data, problem = extract(texts, "verification")
    if data is None:
        return _invalid(VerificationReport, base, problem or "no report", texts)
    report, problem = _validated(VerificationReport, data, base)
    if report is None:
        return _invalid(VerificationReport, base, problem or "invalid report", texts)
    if "recommendation" not in data:
        return _invalid(VerificationReport, base, "the report has no recommendation", texts)
    matched, problem = match_criteria(list(report.acceptance_criteria), criteria)
    if problem:
        return _invalid(VerificationReport, base, problem, texts)
    report.acceptance_criteria = matched
    return report


def parse_review(texts: list[str], base: dict[str, Any]) -> ReviewReport:
    """The review report in ``texts`` (see :func:`parse_verification`)."""
    data, problem = extract(texts, "review")
    if data is None:
        return _invalid(ReviewReport, base, problem or "no report", texts)
    report, problem = _validated(ReviewReport, data, base)
    if report is None:
        return _invalid(ReviewReport, base, problem or "invalid report", texts)
    if "assessment" not in data:
        return _invalid(ReviewReport, base, "the report has no assessment", texts)
    return report


def verification_passed(report: VerificationReport) -> bool:
    """Approved, with every criterion passed (an approval over a failed criterion is not)."""
    return (
        report.valid
        and report.recommendation == "approve"
        and all(c.status == "passed" for c in report.acceptance_criteria)
    )


def review_passed(report: ReviewReport) -> bool:
    """Approved or commented, with no blocking comment (blocking comments mean changes)."""
    return (
        report.valid
        and report.assessment in ("approve", "comment")
        and not report.blocking_comments()
    )
