"""The entities of the data-model seed, with every field, default and constraint.

pydantic validates what people edit and what lives on disk; JSON uses the seed's
camelCase names. Fields marked "ours" extend the seed (agent backend, feedback commands,
cost and usage); every seed field keeps its seed meaning. The camelCase base
:class:`Model` (:mod:`pokeralph_core.model_base`) is re-exported here; the repository's
configuration (``Config`` and its parts) is :mod:`pokeralph_core.config.model`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from pokeralph_core.config.model import PHASE_ORDER, BattlePhase, ExecutionMode, NonEmptyStr, Phase
from pokeralph_core.model_base import Model as Model
from pokeralph_core.timeutil import Timestamp, utcnow
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.domain.statuses import (
    BattleStatus,
    IterationResult,
    ProgressStatus,
    TaskStatus,
)

SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)
COMMIT_RE = r"^[0-9a-f]{7,64}$"


Title = Annotated[str, StringConstraints(min_length=1, max_length=200)]
TaskId = Annotated[str, AfterValidator(validate_task_id)]


# --------------------------------------------------------------------------- PRD and tasks


class FeedbackResult(Model):
    passed: bool
    output: str = ""
    duration: int | None = Field(default=None, ge=0, description="milliseconds")
    command: str | None = None  # ours
    exit_code: int | None = None  # ours
    skipped: bool = False  # ours: no command for this loop in this repository


class CriterionEvidence(Model):
    """One acceptance criterion as the agent's completion block reports it."""

    criterion: str
    met: bool
    evidence: str = ""


class CompletionSignal(Model):
    """How an iteration said it was done: the sigil, or the structured block (ours)."""

    kind: Literal["sigil", "block"]
    summary: str | None = None
    acceptance_criteria_met: list[CriterionEvidence] = Field(default_factory=list)
    files_changed: list[str] = Field(default_factory=list)
    tests_added: list[str] = Field(default_factory=list)
    confidence: float | None = None
    notes: str | None = None


class Usage(Model):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    # Reasoning tokens, a part of output_tokens (OpenAI reports them; Anthropic does not).
    reasoning_output_tokens: int = Field(default=0, ge=0)

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            reasoning_output_tokens=self.reasoning_output_tokens + other.reasoning_output_tokens,
        )


ToolCallStatus = Literal["pending", "approved", "rejected", "executed", "failed"]
MAX_TOOL_CALLS = 500  # calls recorded per iteration; past it only counted
TOOL_INPUT_KEPT = 500  # characters of a call's input (canonical JSON) kept in the record
TOOL_OUTPUT_KEPT = 1000  # characters of a result kept (the whole output is in the log)


class ToolResult(Model):
    """What running a tool gave (seed 001 ``ToolResult``; the output trimmed here, whole
    in the iteration's log)."""

    success: StrictBool
    output: str = Field(default="", max_length=TOOL_OUTPUT_KEPT + 100)
    error: str | None = None
    files_affected: list[str] = Field(default_factory=list, max_length=100)
    execution_time_ms: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _error_iff_failed(self) -> ToolResult:
        if self.success and self.error:
            raise ValueError("a successful tool result has no error")
        if not self.success and not self.error:
            raise ValueError("a failed tool result needs its error")
        for path in self.files_affected:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"filesAffected must hold paths inside the repository: {path!r}")
        return self


class ToolCall(Model):
    """One tool call the agent made in an iteration, and what became of it (seed 001
    ``ToolCall``): pending → approved | rejected → executed | failed.

    ``approvalMethod``: ``config_rule`` (an approval rule, ``ruleId``), ``manual`` (a
    person, in the inbox), ``auto`` (decided without a person: our policy, an ask that
    ran out of time, or the agent itself, which runs some tools without asking and
    refuses others on its own). ``message`` is the reason a call was denied, as the model
    saw it.
    """

    id: str = Field(min_length=1, max_length=200)
    tool_name: str = Field(min_length=1, max_length=200)
    input: str = Field(default="", max_length=TOOL_INPUT_KEPT + 100)
    status: ToolCallStatus = "pending"
    approval_method: Literal["manual", "auto", "config_rule"] | None = None
    rule_id: str | None = Field(default=None, max_length=200)
    message: str | None = Field(default=None, max_length=2100)
    requested_at: Timestamp
    decided_at: Timestamp | None = None
    executed_at: Timestamp | None = None
    result: ToolResult | None = None


class Iteration(Model):
    """A single agent run within a battle (seed ``Iteration``)."""

    number: StrictInt = Field(ge=1)
    started_at: Timestamp
    ended_at: Timestamp | None = None
    output: str = ""
    result: IterationResult
    files_changed: list[str] = Field(default_factory=list)
    commit_hash: Annotated[str, StringConstraints(pattern=COMMIT_RE)] | None = None
    error: str | None = None
    # ours
    duration_ms: int | None = Field(default=None, ge=0)
    feedback_results: dict[str, FeedbackResult] = Field(default_factory=dict)
    completion: CompletionSignal | None = None
    session_id: str | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    usage: Usage | None = None
    exit_code: int | None = None
    approval_note: str | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)  # where the time went
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=MAX_TOOL_CALLS)
    tool_calls_omitted: int = Field(default=0, ge=0)  # made past MAX_TOOL_CALLS
    # the agent run's sandbox (SandboxPolicy.describe(), with "confined"), or why none;
    # left out of the file when there is none (files of older versions round-trip)
    sandbox: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _failure_has_error(self) -> Iteration:
        if self.result == IterationResult.FAILURE and not self.error:
            raise ValueError("error is required when result is 'failure'")
        for path in self.files_changed:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"filesChanged must hold relative paths, got {path!r}")
        return self


class Task(Model):
    """A unit of work run as a battle (seed ``Task``)."""

    id: TaskId
    title: Title
    description: NonEmptyStr
    status: TaskStatus = TaskStatus.PENDING
    priority: StrictInt = Field(default=1, ge=1)
    acceptance_criteria: list[NonEmptyStr] = Field(min_length=1)
    iterations: list[Iteration] = Field(default_factory=list)
    created_at: Timestamp = Field(default_factory=utcnow)
    updated_at: Timestamp = Field(default_factory=utcnow)
    # issue 14: tasks that must be completed before this one starts
    depends_on: list[TaskId] = Field(default_factory=list, max_length=100)


class PRDMetadata(Model):
    version: str | None = None
    generated_by: str | None = None
    original_idea: str | None = None

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str | None) -> str | None:
        if value is not None and not SEMVER_RE.fullmatch(value):
            raise ValueError(f"metadata.version must be semver (like 1.0.0), got {value!r}")
        return value


class PRD(Model):
    """``.pokeralph/prd.json``: the project and its tasks (seed ``PRD``)."""

    name: Title
    description: NonEmptyStr
    tasks: list[Task] = Field(default_factory=list)
    metadata: PRDMetadata | None = None
    created_at: Timestamp = Field(default_factory=utcnow)
    updated_at: Timestamp | None = None

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, tasks: list[Task]) -> list[Task]:
        seen: set[str] = set()
        for task in tasks:
            if task.id in seen:
                raise ValueError(f"duplicate task id {task.id!r}")
            seen.add(task.id)
        check_dependencies(tasks)
        return tasks

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)


def check_dependencies(tasks: list[Task]) -> None:
    """``dependsOn`` names known tasks, never the task itself, and makes no cycle
    (ValueError naming the task, the unknown ids or the cycle)."""
    known = {t.id: t for t in tasks}
    for task in tasks:
        if task.id in task.depends_on:
            raise ValueError(f"task {task.id} depends on itself")
        unknown = [d for d in task.depends_on if d not in known]
        if unknown:
            raise ValueError(f"task {task.id} depends on unknown task(s) {', '.join(unknown)}")
    done: set[str] = set()
    for root in tasks:  # depth-first, iterative (a long chain must not hit the recursion limit)
        if root.id in done:
            continue
        path: list[str] = [root.id]
        on_path = {root.id}
        stack = [iter(root.depends_on)]
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                cycle = [*path[path.index(dep) :], dep]
                raise ValueError("dependsOn makes a cycle: " + " -> ".join(cycle))
            if dep not in done:
                path.append(dep)
                on_path.add(dep)
                stack.append(iter(known[dep].depends_on))


# --------------------------------------------------------------------------- battles


ReportOutcome = Literal["approve", "request_changes", "comment", "invalid"]


class ReportSummary(Model):
    """One verification or review report in brief (the whole report is its own file,
    ``battles/{taskId}/{phase}/report-{cycle}.json``)."""

    cycle: int = Field(ge=1)
    outcome: ReportOutcome
    passed: bool  # the phase passed (an approval, or a review without blocking comments)
    summary: str = ""
    iteration: int | None = None  # the implementation iteration whose work was judged
    head_commit: str | None = None
    created_at: Timestamp
    findings: int = Field(default=0, ge=0)  # verification findings, review comments
    blocking: int = Field(default=0, ge=0)  # failed criteria, blocking review comments
    problem: str | None = None  # why the report is invalid
    cost_usd: float | None = Field(default=None, ge=0)
    duration_ms: int | None = Field(default=None, ge=0)
    # the role's run's sandbox, as an iteration records its own (left out when none)
    sandbox: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class PhaseCycles(Model):
    """Seed 003's feedback loop of one phase: runs so far, the bound, each run's report."""

    count: int = Field(default=0, ge=0)  # reports written (the last one's cycle number)
    limit: int = Field(default=3, ge=1)  # past this many rejections the battle escalates
    reports: list[ReportSummary] = Field(default_factory=list)


class Finding(Model):
    """One thing a verifier or reviewer asks the implementer to change."""

    severity: str = "major"
    description: str
    file: str | None = None
    line: int | None = None
    suggestion: str | None = None


class Findings(Model):
    """What the last rejecting report asks for: it goes into every implementation
    prompt until the phase runs again."""

    phase: Literal["verification", "review"]
    cycle: int = Field(ge=1)
    summary: str = ""
    items: list[Finding] = Field(default_factory=list)


EscalationReason = Literal[
    "verification_cycles", "review_cycles", "transient_failures", "merge_conflict"
]
EscalationAction = Literal["retry", "accept", "cancel"]


class EscalationResolution(Model):
    action: EscalationAction
    guidance: str | None = None
    at: Timestamp
    delivery_id: str | None = None  # the inbox answer it came from
    applied: bool = False  # the runner acted on it (consumed exactly once)


class Escalation(Model):
    """Seed 003's escalation: a person decides, once."""

    number: int = Field(ge=1)
    at: Timestamp
    phase: Phase
    reason: EscalationReason
    message: str
    delivery_id: str | None = None
    resolution: EscalationResolution | None = None


class Blocked(Model):
    """Why a battle is blocked and when it retries (seed 003's transient failures)."""

    reason: str
    kind: str  # rate_limit, overloaded, server, connection, exit_code
    since: Timestamp
    retry_at: float | None = None  # epoch seconds on the engine's clock
    retry: int = Field(default=0, ge=0)  # this failure's number in a row
    max_retries: int | None = None  # None: retried until the reset (a rate limit)


class BattleWorktree(Model):
    """Where a parallel battle runs (issue 14): its own git worktree on its own branch,
    merged back into ``base_branch`` when it completes."""

    path: str  # under the daemon's state folder, outside the user's working tree
    branch: str  # pokeralph/{taskId}
    base_branch: str  # the branch checked out when the battle started
    merged: bool = False
    merge_commit: str | None = None  # the branch's tip once merged (after a rebase)
    removed: bool = False  # the worktree is gone (the battle ended)


class Battle(Model):
    """``battles/{taskId}/history.json``: one task's battle record (seed ``Battle``)."""

    task_id: TaskId
    status: BattleStatus
    iterations: list[Iteration] = Field(default_factory=list)
    started_at: Timestamp
    completed_at: Timestamp | None = None
    duration_ms: int | None = Field(default=None, ge=0)
    error: str | None = None
    # ours
    mode: ExecutionMode = ExecutionMode.HITL
    max_iterations: int | None = Field(default=None, gt=0)
    cost_usd: float = Field(default=0, ge=0)
    usage: Usage = Field(default_factory=Usage)
    attempt: int = Field(default=1, ge=1)
    paused_reason: str | None = None
    # seed 003 (schema 2): phases, bounded cycles, escalations, transient blocks
    phase: BattlePhase = "implementation"
    phases: list[Phase] = Field(default_factory=lambda: list(PHASE_ORDER[:1]))
    base_commit: str | None = None  # HEAD when the battle started: the diff's base
    verification: PhaseCycles = Field(default_factory=lambda: PhaseCycles(limit=3))
    review: PhaseCycles = Field(default_factory=lambda: PhaseCycles(limit=2))
    findings: Findings | None = None
    guidance: str | None = None  # a person's, from the last escalation answered "retry"
    escalations: list[Escalation] = Field(default_factory=list)
    blocked: Blocked | None = None
    transient_failures: int = Field(default=0, ge=0)  # in a row
    worktree: BattleWorktree | None = None  # issue 14: a parallel battle's own worktree

    @model_validator(mode="after")
    def _failed_has_error(self) -> Battle:
        if self.status == BattleStatus.FAILED and not self.error:
            raise ValueError("error is required when status is 'failed'")
        return self


class Progress(Model):
    """``battles/{taskId}/progress.json``: live progress, written by the daemon alone."""

    task_id: TaskId
    current_iteration: int = Field(default=0, ge=0)
    status: ProgressStatus = ProgressStatus.IDLE
    last_update: Timestamp = Field(default_factory=utcnow)
    logs: list[str] = Field(default_factory=list)
    last_output: str = ""
    completion_detected: bool = False
    error: str | None = None
    feedback_results: dict[str, FeedbackResult] = Field(default_factory=dict)
    # ours: the running agent, so a restarted daemon can end what its predecessor left
    agent_pid: int | None = None
    agent_started: float | None = None  # process create_time, to tell pid reuse apart
