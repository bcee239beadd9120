"""The event types: every ``event`` notification's payload, as msgspec structs.

The daemon publishes these structs themselves: an event's type is its struct's name in
:data:`EVENT_TYPES` (:func:`name_of`), its payload the struct, encoded once by the bus;
no code outside this package names an event by a string (an architecture test checks).
``shared/schemas/events`` is generated from them; ``tests/unit/test_contract.py``
checks that the event types the code publishes are exactly these; and
:func:`check_event` checks real events against them wherever the integration tests read
events (``tests.helpers.events_of``, and every event of
``tests/integration/test_contract_live.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Payload(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Base of event payloads."""


class TaskEvent(Payload):
    """Base of the events about one task: its battle, its iterations, its permissions."""

    task_id: str


ChunkKind = Literal["text", "tool_use", "tool_result", "tool_error", "stderr", "notice"]


class Chunk(msgspec.Struct, gc=False):
    """A piece of agent output (coalesced by kind)."""

    kind: ChunkKind
    text: str


#: How a permission was decided: a rule, a person, the policy for unmatched calls, a
#: person's silence, or the size limit on inputs.
DecisionMethod = Literal["config_rule", "manual", "policy", "timeout", "limit"]


class Envelope(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """``params`` of every ``event`` notification."""

    seq: int
    type: str
    repo: str | None
    payload: dict[str, Any]
    timestamp: str
    task_id: str | None = None


# -- repositories, config, PRD, tasks
class RepoRegistered(Payload):
    name: str
    path: str


class RepoUnregistered(RepoRegistered):
    pass


class ConfigUpdated(Payload):
    config: dict[str, Any]
    version: int
    patch: dict[str, Any]


class PrdUpdated(Payload):
    prd: dict[str, Any]
    version: int


class TaskCreated(Payload):
    task: dict[str, Any]
    version: int


class TaskUpdated(Payload):
    task: dict[str, Any]
    changed: list[str]
    version: int


class TaskDeleted(TaskEvent):
    version: int


# -- battles
class BattleStart(TaskEvent):
    mode: str
    max_iterations: int | None


class BattleQueued(TaskEvent):
    position: int


class BattleResumed(TaskEvent):
    iteration: int | None = None
    reason: str | None = None


class BattlePaused(TaskEvent):
    reason: str
    recovered: bool = False
    rate_limited_until: float | None = None


class BattleCancelled(TaskEvent):
    iterations: int


class BattleComplete(TaskEvent):
    iterations: int
    cost_usd: float
    completion: dict[str, Any] | None = None


class BattleFailed(TaskEvent):
    error: str
    iterations: int


class BattleReverted(TaskEvent):
    commit_hash: str
    title: str


class WorktreeCreated(TaskEvent):
    """A parallel battle's worktree was made (issue 14)."""

    path: str
    branch: str
    from_: str = msgspec.field(name="from")


class WorktreeRemoved(TaskEvent):
    """A battle ended and its worktree was removed; its branch too unless kept (a failed
    battle's unmerged commits, an accepted merge conflict's)."""

    path: str
    branch: str
    branch_kept: bool


class BattleMerged(TaskEvent):
    """A worktree battle's branch was merged back into the branch it started from."""

    branch: str
    into: str
    commit: str | None


class MergeFailed(TaskEvent):
    """Merging a worktree battle's branch back was refused: a conflict, a diverged branch
    with mergeStrategy ff, or the user's uncommitted changes in the way."""

    branch: str
    into: str
    reason: str | None
    files: list[str]
    message: str


class BattlesScheduled(Payload):
    """``battle.start`` with ``all``: what started, what waits, what could not start."""

    started: list[str]
    waiting: list[str]
    refused: dict[str, str] = {}
    done: bool = False


class IterationStart(TaskEvent):
    iteration: int
    max_iterations: int | None


class IterationOutput(TaskEvent):
    """An iteration's output; with ``phase`` (and its ``cycle``), a verifier's or
    reviewer's run after that iteration."""

    iteration: int
    chunks: list[Chunk]
    phase: Literal["verification", "review"] | None = None
    cycle: int | None = None


class IterationEnd(TaskEvent):
    iteration: int
    result: str
    error: str | None
    duration_ms: int | None
    cost_usd: float | None
    battle_cost_usd: float
    files_changed: list[str]
    commit_hash: str | None
    completion: dict[str, Any] | None
    feedback: dict[str, bool]


class ProgressUpdate(TaskEvent):
    progress: dict[str, Any]


class FeedbackResultEvent(TaskEvent):
    iteration: int
    loop: str
    result: dict[str, Any]
    results: dict[str, dict[str, Any]]


class PermissionRequested(TaskEvent):
    """An agent asks whether it may run a tool (routed backends: Claude Code)."""

    iteration: int
    request_id: str
    tool: str
    input: str  # the input as canonical JSON, for a person: pokeralph_core.input_view
    input_length: int  # characters of the whole input as canonical JSON
    description: str  # the model's own words, as a JSON string, shown the same way


class PermissionDecided(TaskEvent):
    iteration: int
    request_id: str
    tool: str
    allowed: bool
    method: DecisionMethod
    rule_id: str | None = None
    message: str | None = None
    delivery_id: str | None = None


class AwaitApproval(TaskEvent):
    iteration: int
    result: str
    completion: dict[str, Any] | None
    feedback: dict[str, bool]
    files_changed: list[str]
    commit_hash: str | None


class AwaitApprovalDelivery(TaskEvent):
    iteration: int
    delivery_id: str


class ApprovalReceived(TaskEvent):
    iteration: int
    approved: bool
    note: str | None


class PhaseChanged(TaskEvent):
    """The battle moved to another phase (seed 003); ``cycle`` is the next report's
    number in a verification or review phase."""

    phase: Literal["implementation", "verification", "review", "done"]
    previous: Literal["implementation", "verification", "review", "done"]
    cycle: int | None
    reason: str


class CriteriaCounts(msgspec.Struct):
    passed: int
    failed: int
    blocked: int


class VerificationReportEvent(TaskEvent):
    """A verification report was saved (``path``); ``passed`` decides the next phase."""

    cycle: int
    max_cycles: int
    iteration: int | None
    valid: bool
    passed: bool
    outcome: Literal["approve", "request_changes", "invalid"]
    summary: str
    problem: str | None
    findings: int
    blocking: int  # criteria not passed
    criteria: CriteriaCounts
    path: str


class ReviewReportEvent(TaskEvent):
    """A review report was saved; blocking comments mean changes."""

    cycle: int
    max_cycles: int
    iteration: int | None
    valid: bool
    passed: bool
    outcome: Literal["approve", "request_changes", "comment", "invalid"]
    assessment: Literal["approve", "request_changes", "comment"] | None
    summary: str
    problem: str | None
    findings: int  # comments
    blocking: int  # blocking comments
    path: str


class BattleBlocked(TaskEvent):
    """A transient failure: the battle retries the same step at ``retryAt`` (epoch
    seconds on the daemon's clock), or when resumed."""

    reason: str
    kind: str
    retry_at: float | None
    retry: int
    max_retries: int | None
    phase: str


class BattleEscalated(TaskEvent):
    """The bounded loops ran out: a person decides (``escalation.deliveryId``)."""

    escalation: dict[str, Any]


class EscalationResolved(TaskEvent):
    escalation: int
    action: Literal["retry", "accept", "cancel"]
    guidance: str | None
    delivery_id: str | None


class Notice(TaskEvent):
    message: str


class BudgetExceeded(TaskEvent):
    """A battle paused before an agent run that would pass a spending cap."""

    cap: Literal["perBattleUsd", "perRepoPerDayUsd", "perDayUsd"]
    limit_usd: float
    spent_usd: float
    next_usd: float
    reason: str


class AgentRefused(Payload):
    """An agent's connection asked for something agents may not (see the agent scope)."""

    method: str
    kind: Literal["battle", "planning", "child"]
    reason: str
    pid: int | None = None


# -- notifications
class NotifyFailed(Payload):
    """A notification was given up on after its attempts (issue 26): which channel, what
    it was about, why. Never the webhook's URL."""

    channel: str
    format: str
    kinds: list[str]
    attempts: int
    error: str
    delivery_id: str | None = None


# -- inbox
class NewDelivery(Payload):
    id: str
    delivery: dict[str, Any]


class FeedbackReceived(Payload):
    id: str
    feedback: dict[str, Any]
    delivery: dict[str, Any]


class DeliveryTimeout(Payload):
    id: str
    delivery: dict[str, Any]


class DeliveryClosed(Payload):
    id: str
    reason: str | None
    delivery: dict[str, Any]


class AnnotationAdded(Payload):
    id: str
    annotation: dict[str, Any]


# -- planning
class PlanningOutput(Payload):
    turn: int
    chunks: list[Chunk]


class PlanningQuestion(Payload):
    questions: list[str]
    question: str
    delivery_id: str | None


class PlanningCompleted(Payload):
    prd: dict[str, Any]
    valid: bool
    problems: list[dict[str, str]]


class PlanningFailed(Payload):
    error: str
    state: str


class PlanningReset(Payload):
    pass


class DebugEvent(Payload):
    i: int
    t: float
    pad: str


EVENT_TYPES: dict[str, type[Payload]] = {
    "debug": DebugEvent,
    "repo_registered": RepoRegistered,
    "repo_unregistered": RepoUnregistered,
    "config_updated": ConfigUpdated,
    "prd_updated": PrdUpdated,
    "task_created": TaskCreated,
    "task_updated": TaskUpdated,
    "task_deleted": TaskDeleted,
    "battle_start": BattleStart,
    "battle_queued": BattleQueued,
    "battle_resumed": BattleResumed,
    "battle_paused": BattlePaused,
    "battle_cancelled": BattleCancelled,
    "battle_complete": BattleComplete,
    "battle_failed": BattleFailed,
    "battle_reverted": BattleReverted,
    "worktree_created": WorktreeCreated,
    "worktree_removed": WorktreeRemoved,
    "battle_merged": BattleMerged,
    "merge_failed": MergeFailed,
    "battles_scheduled": BattlesScheduled,
    "iteration_start": IterationStart,
    "iteration_output": IterationOutput,
    "iteration_end": IterationEnd,
    "progress_update": ProgressUpdate,
    "feedback_result": FeedbackResultEvent,
    "permission_requested": PermissionRequested,
    "permission_decided": PermissionDecided,
    "agent_refused": AgentRefused,
    "budget_exceeded": BudgetExceeded,
    "await_approval": AwaitApproval,
    "await_approval_delivery": AwaitApprovalDelivery,
    "approval_received": ApprovalReceived,
    "notice": Notice,
    "phase_changed": PhaseChanged,
    "verification_report": VerificationReportEvent,
    "review_report": ReviewReportEvent,
    "battle_blocked": BattleBlocked,
    "battle_escalated": BattleEscalated,
    "escalation_resolved": EscalationResolved,
    "notify_failed": NotifyFailed,
    "new_delivery": NewDelivery,
    "feedback_received": FeedbackReceived,
    "delivery_timeout": DeliveryTimeout,
    "delivery_closed": DeliveryClosed,
    "annotation_added": AnnotationAdded,
    "planning_output": PlanningOutput,
    "planning_question": PlanningQuestion,
    "planning_completed": PlanningCompleted,
    "planning_failed": PlanningFailed,
    "planning_reset": PlanningReset,
}


EVENT_NAMES: dict[type[Payload], str] = {cls: name for name, cls in EVENT_TYPES.items()}


def name_of(event: Payload) -> str:
    """The event type ``event`` is published as."""
    return EVENT_NAMES[type(event)]


def check_event(params: Any) -> None:
    """Raise ``msgspec.ValidationError`` unless ``params`` is a well-formed event."""
    envelope = msgspec.convert(params, Envelope)
    payload_type = EVENT_TYPES.get(envelope.type)
    if payload_type is None:
        raise msgspec.ValidationError(f"unknown event type {envelope.type!r}")
    msgspec.convert(envelope.payload, payload_type)
