"""Result types of every JSON-RPC method (msgspec structs, camelCase on the wire).

These are the single source of the results, as :mod:`pokeralphd.protocol.params` is of
the params: each method names its result type where it is registered
(``MethodTable.add(..., result=...)``), its handler returns a value of that type (msgspec
encodes structs directly), and ``rpc.discover`` / ``shared/openrpc.json`` generate each
result's JSON Schema from it. The services build these structs themselves (this module
sits below them, beside the domain) and the handlers pass them on: no result goes
through a dict that would be converted back (issue 22). Built by hand, a struct encodes
what it is given: a ``float`` field gets a float (``0.0``, not ``0``).

A field that holds one of the ``.pokeralph/`` documents (a PRD, a task, a battle, a
delivery, ...) carries the document as its pydantic model dumps it: typed
``dict[str, Any]`` here, and described in the schema by a reference to the model's own
pydantic-generated schema (:func:`document` records the model, :func:`model_components`
gives the schemas), so the contract is as precise as the documents themselves.

Structs forbid unknown fields: a service that starts returning a key the contract does
not name fails loudly (and every test that calls the method with it) instead of drifting.
``tests/integration/test_contract_live.py`` calls every method on a real daemon and checks
each real result against its generated schema.
"""

from __future__ import annotations

import copy
import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType
from pydantic.json_schema import models_json_schema

from pokeralph_core.config.model import Config, ExecutionMode
from pokeralphd.domain.inbox import Annotation, Delivery, DeliveryMode, DeliveryStatus, Feedback
from pokeralphd.domain.models import PRD, Battle, Progress, Task
from pokeralphd.domain.planning import PlanningState
from pokeralphd.domain.reports import ReviewReport, VerificationReport
from pokeralphd.domain.statuses import BattleStatus

if TYPE_CHECKING:
    from pydantic import BaseModel

REF = "#/components/schemas/{name}"

#: The pydantic models that results refer to, by name (filled by :func:`document`).
DOCUMENT_MODELS: dict[str, type[BaseModel]] = {}


def document(model: type[BaseModel]) -> msgspec.Meta:
    """Schema metadata for a field holding ``model`` dumped: a reference to its schema."""
    DOCUMENT_MODELS[model.__name__] = model
    return msgspec.Meta(extra_json_schema={"$ref": REF.format(name=model.__name__)})


def model_components() -> dict[str, Any]:
    """JSON Schemas of the documents results refer to (and of what they nest), by name
    (made once, ~50 ms; each caller gets its own copy to change as it likes)."""
    return copy.deepcopy(_model_components())


@functools.cache
def _model_components() -> dict[str, Any]:
    _, top = models_json_schema(
        [(m, "serialization") for m in DOCUMENT_MODELS.values()],
        ref_template=REF.format(name="{model}"),
        by_alias=True,
    )
    return dict(top.get("$defs", {}))


ConfigDoc = Annotated[dict[str, Any], document(Config)]
PrdDoc = Annotated[dict[str, Any], document(PRD)]
TaskDoc = Annotated[dict[str, Any], document(Task)]
BattleDoc = Annotated[dict[str, Any], document(Battle)]
ProgressDoc = Annotated[dict[str, Any], document(Progress)]
DeliveryDoc = Annotated[dict[str, Any], document(Delivery)]
FeedbackDoc = Annotated[dict[str, Any], document(Feedback)]
AnnotationDoc = Annotated[dict[str, Any], document(Annotation)]
ReportDoc = Annotated[
    dict[str, Any],
    msgspec.Meta(
        extra_json_schema={
            "anyOf": [
                document(VerificationReport).extra_json_schema,
                document(ReviewReport).extra_json_schema,
            ]
        }
    ),
]
Timestamp = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
Epoch = Annotated[
    str,
    msgspec.Meta(
        description="names this daemon process: sequence numbers belong to it, and a "
        "restarted daemon has another epoch (a since from before means nothing to it)"
    ),
]


class Result(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Base of all result structs."""


# -- daemon
Pong = Literal["pong"]
OpenRpcDocument = Annotated[
    dict[str, Any], msgspec.Meta(description="this OpenRPC document (shared/openrpc.json)")
]


class RepoRef(Result):
    """A registered repository; ``error`` says why it cannot be used (else null)."""

    name: str
    path: str
    error: str | None


class SpendTotals(Result):
    """Cost and tokens of a set of iterations, from the ledger."""

    cost_usd: float
    iterations: int
    tokens: dict[str, int]


class SandboxStatus(Result):
    """Whether battles' runs can be confined here; ``warning`` says why not."""

    available: bool
    bwrap: str | None
    warning: str | UnsetType = UNSET


class RunStarts(Result):
    """Runs loading now (``starting``, at most ``slots``: the daemon's startingRuns) and
    runs waiting for a slot before their process starts (``waiting``)."""

    slots: int
    starting: int
    waiting: int


class DaemonStatus(Result):
    version: str
    pid: int
    uptime: float
    socket: str
    activated: bool
    repositories: list[RepoRef]
    clients: int
    seq: int
    epoch: Epoch
    spend_today: SpendTotals | UnsetType = UNSET  # UTC day, every repository
    sandbox: SandboxStatus | UnsetType = UNSET  # issue 23
    starts: RunStarts | UnsetType = UNSET  # the start gate (startingRuns)


class CostPart(SpendTotals, kw_only=True):
    key: str  # the group's part: by ``split`` (a day's repository, say)


class CostGroup(SpendTotals, kw_only=True):
    key: str  # the day (YYYY-MM-DD), repository, repo/task, backend, model or phase
    parts: list[CostPart] | UnsetType = UNSET  # by ``split``, when it is given


class CostSummaryResult(Result):
    by: str
    groups: list[CostGroup]
    total: SpendTotals
    skipped: int  # ledger lines that did not parse (a crash cut one short, a hand edit)
    split: str | UnsetType = UNSET  # as asked (then each group has its parts)


class ShutdownResult(Result):
    stopping: bool


# -- repositories
class BattleSummary(Result):
    """A repository's active battle, in brief."""

    task_id: str
    status: BattleStatus
    iteration: int
    mode: ExecutionMode
    max_iterations: int | None
    cost_usd: float
    paused_reason: str | None
    # seed 003
    phase: Literal["implementation", "verification", "review", "done"] = "implementation"
    phases: list[str] = msgspec.field(default_factory=lambda: ["implementation"])
    verification_cycle: int = 0  # reports so far
    review_cycle: int = 0
    blocked_reason: str | None = None
    retry_at: float | None = None
    escalation: dict[str, Any] | None = None  # the open one, with its inbox item
    # How its config loosens safety (e.g. permissions.unmatched allow): shown to people.
    warnings: list[str] = []
    # issue 14: a parallel battle's worktree and branch
    worktree: str | None = None
    branch: str | None = None


class RepoSummary(RepoRef):
    """A repository: PRD name and version, task counts by status, battle (if usable)."""

    prd: str | UnsetType | None = UNSET
    prd_version: int | UnsetType = UNSET
    tasks: dict[str, int] | UnsetType = UNSET
    battle: BattleSummary | UnsetType | None = UNSET


class RepoUnregisterResult(Result):
    name: str
    path: str


# -- config
class TrustState(Result):
    """Whether the repository layer applies in full, and which sensitive keys it sets:
    untrusted, which of them wait for trust (ignored) and which apply because they only
    tighten."""

    trusted: bool
    hash: str
    trusted_hash: str | None
    sensitive_keys: list[str]
    ignored_keys: list[str]
    tightening_keys: list[str]
    message: str | None
    hint: str | None


class ConfigResult(Result):
    config: ConfigDoc
    sources: dict[str, Literal["default", "user", "repo"]]  # top-level key -> layer
    repo_layer: dict[str, Any]  # as on disk, ignored keys included
    version: int
    trust: TrustState


class TrustResult(Result):
    repo: str
    path: str
    changed: bool
    trust: TrustState
    sensitive_values: dict[str, Any]  # the keys trust decides on: they wait while untrusted


class TrustEntry(Result):
    """One repository's trust state, or the error that kept it from being read."""

    repo: str
    path: str
    trust: TrustState | UnsetType = UNSET
    error: str | UnsetType = UNSET


class TrustListResult(Result):
    repos: list[TrustEntry]


class UserConfigResult(Result):
    """The user's layer (webhook URLs redacted) and the config it makes with the
    defaults, before any repository's layer."""

    config: ConfigDoc
    layer: dict[str, Any]  # the keys the user's layer sets (trust records aside)
    version: int
    path: str


# -- notifications
class NotifyChannelResult(Result):
    channel: str
    format: str  # "desktop" or a webhook format
    ok: bool
    error: str | None


class NotifyTestResult(Result):
    results: list[NotifyChannelResult]


# -- PRD and tasks
class PrdGetResult(Result):
    prd: PrdDoc | None
    version: int


class PrdResult(Result):
    prd: PrdDoc
    version: int


class TaskListResult(Result):
    tasks: list[TaskDoc]
    version: int


class TaskResult(Result):
    task: TaskDoc
    version: int  # the PRD's


class TaskDeleteResult(Result):
    task_id: str
    version: int


# -- events
class SubscribeResult(Result):
    """``replayed`` and ``lost`` come with ``since``; ``oldestSeq`` (the first event
    replayed) when events were lost: dropped from history, or older than what one replay
    sends (the newest that fit half the subscriber backlog)."""

    subscription: int
    seq: int
    epoch: Epoch
    replayed: int | UnsetType = UNSET
    lost: int | UnsetType = UNSET
    oldest_seq: int | UnsetType = UNSET


class UnsubscribeResult(Result):
    unsubscribed: list[int]


# -- battles
class BattleResult(Result):
    battle: BattleDoc


class BattleStartResult(Result):
    """The battle started (with ``all``: the first started, if any, and what started,
    what waits for a slot or a dependency, what could not start and why)."""

    battle: BattleDoc | None
    queued: bool
    started: list[str] = []
    waiting: list[str] = []
    refused: dict[str, str] = {}


class BattlePauseResult(Result):
    """``pauseRequested`` unless the battle was paused already."""

    battle: BattleDoc
    pause_requested: bool | UnsetType = UNSET


class BattleApproveResult(Result):
    battle: BattleDoc
    approved: bool


class BattleResolveResult(Result):
    battle: BattleDoc


class RepoBattle(BattleSummary, kw_only=True):
    repo: str


class EngineSummary(Result):
    slots_free: int
    waiting: int


class BattleCurrentResult(Result):
    battles: list[RepoBattle]
    engine: EngineSummary


class ProgressResult(Result):
    progress: ProgressDoc | None


class HistoryResult(Result):
    """``version`` of history.json, unless the battle is active (then it is live)."""

    battle: BattleDoc | None
    version: int | UnsetType = UNSET


class ReportResult(Result):
    """A verification or review report (``battles/{taskId}/{phase}/report-{n}.json``)."""

    phase: Literal["verification", "review"]
    report: ReportDoc
    version: int


class LogResult(Result):
    iteration: int
    data: str
    offset: int
    next_offset: int
    size: int


class DiffResult(Result):
    """``git show`` of the iteration's commit (stat and patch), cut at ``limit`` bytes."""

    task_id: str
    iteration: int
    commit: str
    diff: str
    truncated: bool


class RevertResult(Result):
    task_id: str
    revert_commit: str


# -- inbox
class InboxItem(Result):
    """An inbox index entry (``.pokeralph/inbox/index.json``) and its repository."""

    repo: str
    id: str
    mode: DeliveryMode
    status: DeliveryStatus
    title: str
    created_at: Timestamp
    completed_at: Timestamp | None


class InboxListResult(Result):
    items: list[InboxItem]


class InboxGetResult(Result):
    repo: str
    delivery: DeliveryDoc
    feedback: list[FeedbackDoc]
    annotations: list[AnnotationDoc]


class DeliveryCreated(Result):
    repo: str
    delivery: DeliveryDoc


class AnswerResult(Result):
    repo: str
    feedback: FeedbackDoc


class AnnotateResult(Result):
    annotation: AnnotationDoc


class CloseResult(Result):
    delivery: DeliveryDoc


class WaitResult(Result):
    """``answer``: the last feedback when answered, null when closed, absent on timeout."""

    status: Literal["answered", "closed", "timeout"]
    id: str
    repo: str
    answer: FeedbackDoc | UnsetType | None = UNSET


# -- planning
class Problem(Result):
    """What is wrong with a PRD draft, by field."""

    field: str
    problem: str


class PlanningStatus(Result):
    """The planning session (as in .pokeralph/planning/session.json), lastOutput cut."""

    state: PlanningState
    idea: str | None
    breakdown: bool
    session_id: str | None
    questions: list[str]
    delivery_id: str | None
    prd: dict[str, Any] | None  # the draft, as the agent wrote it
    problems: list[Problem]
    error: str | None
    turns: int
    last_output: str


class FinishResult(Result):
    """``prd``: the PRD when valid (as saved, with ``version``, when saved), else the draft."""

    valid: bool
    problems: list[Problem]
    saved: bool
    prd: dict[str, Any]
    version: int | UnsetType = UNSET


# -- debug
class EmitResult(Result):
    published: int
    seq: int


# -- approval rules
class RuleView(Result):
    """An approval rule in effect: as its config layer holds it, where, and its usage."""

    id: str
    tool_name: str
    decision: Literal["allow", "deny"]
    param_pattern: str
    description: str
    created_at: Timestamp | None
    source: Literal["repo", "user"]  # the layer: the repository's rules come first
    last_used_at: Timestamp | None
    use_count: int


class RulesListResult(Result):
    """The effective rules in order; ``ignoredRepoRules`` rules of the repository's
    layer are not applied because it is not trusted (``trustMessage`` says why)."""

    rules: list[RuleView]
    ignored_repo_rules: int
    trust_message: str | None


class RuleAddResult(Result):
    rule: RuleView


class RulesInstallDefaultsResult(Result):
    """The ids of the local agent's default rules added to the user's layer (none when
    they were offered before: a rule the user removed is not brought back)."""

    added: list[str]


class RulesRemoveResult(Result):
    removed: list[RuleView]


class RulesTestResult(Result):
    """``decision`` null: no rule decides, the policy does (a person, by default)."""

    decision: Literal["allow", "deny"] | None
    rule: RuleView | None
    reason: str
    canonical_input: str  # what the patterns are matched against (a search)
    input_length: int  # its length in characters (the whole input's, when too large)
    input_view: str  # the same for a person: pokeralph_core.input_view
