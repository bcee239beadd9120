"""Seed 003's reports as JSON documents: the QA agent's verification report (its section
4.4) and the reviewer's review report (4.5), one file per cycle,
``battles/{taskId}/verification/report-{n}.json`` and ``…/review/report-{n}.json``.

What the agent wrote is validated into these models; what it could not say right (no
report, bad JSON, a criterion left out) makes the report ``valid: false`` with the
``problem`` named: a failed verification, never an approval. Every list and text an
agent can fill is bounded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from pokeralph_core.timeutil import Timestamp
from pokeralphd.domain.models import Model

Text = Annotated[str, StringConstraints(max_length=4000)]
Short = Annotated[str, StringConstraints(max_length=500)]
MAX_ITEMS = 200


class ReportModel(Model):
    """Keys an agent adds beyond the seed's shape are dropped, not fatal (a model that
    adds ``"notes"`` to a criterion still reported on it); the types stay strict."""

    model_config = ConfigDict(**{**Model.model_config, "extra": "ignore"})


class SuiteSummary(ReportModel):
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)


class FailedTest(ReportModel):
    name: Short
    error: Text = ""
    file: Short | None = None
    line: int | None = Field(default=None, ge=0)


class CommandRun(ReportModel):
    """A test command the verifier ran, and what came of it."""

    command: Short
    passed: bool
    exit_code: int | None = None
    output: Text = ""


class SuiteResults(ReportModel):
    summary: SuiteSummary = Field(default_factory=SuiteSummary)
    failures: list[FailedTest] = Field(default_factory=list, max_length=MAX_ITEMS)
    commands: list[CommandRun] = Field(default_factory=list, max_length=MAX_ITEMS)


class CriterionResult(ReportModel):
    """One acceptance criterion: passed (met), failed, or blocked (could not be tested)."""

    id: int | None = Field(default=None, ge=1)  # its number in the task's list
    criterion: Text
    status: Literal["passed", "failed", "blocked"]
    evidence: Text = ""
    issue_ref: Short | None = None


Severity = Literal["critical", "major", "minor", "info"]


class FeedbackItem(ReportModel):
    severity: Severity = "major"
    description: Text
    file: Short | None = None
    line: int | None = Field(default=None, ge=0)
    suggestion: Text | None = None


class VerificationFeedback(ReportModel):
    priority: Literal["low", "medium", "high", "critical"] | None = None
    summary: Text = ""
    items: list[FeedbackItem] = Field(default_factory=list, max_length=MAX_ITEMS)


class AgentRun(ReportModel):
    """Who wrote a report, and what the run cost (ours)."""

    backend: str
    model: str | None = None
    session_id: str | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    duration_ms: int | None = Field(default=None, ge=0)
    exit_code: int | None = None


class ReportContext(ReportModel):
    """What a report judged (ours): the battle's diff and the iteration it ended with."""

    task_id: str
    cycle: int = Field(ge=1)
    created_at: Timestamp
    iteration: int | None = None
    base_commit: str | None = None
    head_commit: str | None = None
    valid: bool = True
    problem: str | None = None  # why the report is not valid
    raw: Text = ""  # the agent's last words when the report is not valid
    agent: AgentRun | None = None
    # paths the role's run changed in the working tree, which were put back
    discarded_changes: list[Short] = Field(default_factory=list, max_length=MAX_ITEMS)
    # paths it changed that held a person's uncommitted edits: left, named here
    kept_changes: list[Short] = Field(default_factory=list, max_length=MAX_ITEMS)


class VerificationReport(ReportContext):
    """``battles/{taskId}/verification/report-{cycle}.json`` (seed 4.4)."""

    test_results: SuiteResults = Field(default_factory=SuiteResults)
    acceptance_criteria: list[CriterionResult] = Field(default_factory=list, max_length=MAX_ITEMS)
    recommendation: Literal["approve", "request_changes"] = "request_changes"
    feedback: VerificationFeedback = Field(default_factory=VerificationFeedback)


ReviewSeverity = Literal["blocking", "suggestion", "critical", "major", "minor", "info"]


class ReviewComment(ReportModel):
    id: Short | None = None
    severity: ReviewSeverity = "suggestion"
    blocking: bool = False
    file: Short | None = None
    line: int | None = Field(default=None, ge=0)
    issue: Text
    suggestion: Text | None = None
    category: Short | None = None

    @model_validator(mode="before")
    @classmethod
    def _blocking_severity(cls, data: Any) -> Any:
        """Seed 4.5 says ``severity: blocking``; ours adds the flag: either one blocks."""
        if isinstance(data, dict) and data.get("severity") == "blocking":
            data = {**data, "blocking": True}
        return data


class SecurityItem(ReportModel):
    type: Short = ""
    description: Text
    severity: Severity = "major"
    file: Short | None = None
    line: int | None = Field(default=None, ge=0)


class SecurityScan(ReportModel):
    vulnerabilities_found: int = Field(default=0, ge=0)
    items: list[SecurityItem] = Field(default_factory=list, max_length=MAX_ITEMS)


class ReviewFeedback(ReportModel):
    blocking_count: int = Field(default=0, ge=0)
    suggestion_count: int = Field(default=0, ge=0)
    priority_order: list[Short] = Field(default_factory=list, max_length=MAX_ITEMS)
    message: Text = ""


class ReviewReport(ReportContext):
    """``battles/{taskId}/review/report-{cycle}.json`` (seed 4.5)."""

    assessment: Literal["approve", "request_changes", "comment"] = "request_changes"
    comments: list[ReviewComment] = Field(default_factory=list, max_length=MAX_ITEMS)
    security: SecurityScan = Field(default_factory=SecurityScan)
    feedback: ReviewFeedback = Field(default_factory=ReviewFeedback)

    def blocking_comments(self) -> list[ReviewComment]:
        return [c for c in self.comments if c.blocking]
