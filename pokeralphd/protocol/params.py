"""Parameter types of every JSON-RPC method (msgspec structs, camelCase on the wire).

These are the single source of the method signatures: the dispatcher decodes params
into them, and ``rpc.discover`` / ``shared/openrpc.json`` are generated from them.
Field order is the order for params by position; ``repo`` (a path inside the
repository, or its short name) always comes last so it can be left out.

Validate at the edge: every limit a param has is declared here with msgspec ``Meta``, so a
bad value is ``-32602`` naming the field before any handler runs, and the limits show in
``shared/openrpc.json``. They are generous but finite; a message is capped at 1 MiB anyway.
Integers never take floats or booleans, floats take integers but never NaN or infinities.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from pokeralph_core.approval import DESCRIPTION_MAX, PATTERN_MAX, RULE_ID_RE, TOOL_NAME_MAX
from pokeralphd.domain.ids import (
    DELIVERY_ID_MAX_LEN,
    DELIVERY_ID_PATTERN,
    TASK_ID_MAX_LEN,
    TASK_ID_PATTERN,
    wire_pattern,
)
from pokeralphd.domain.inbox import MAX_WAIT_SECONDS

# -- limits (documented in the README)
TITLE_MAX = 200  # characters: a task's or a delivery's title, a PRD's name (seed 000)
TEXT_MAX = 1 << 20  # characters: descriptions, bodies, notes, comments, answers, ideas
PATH_MAX = 4096  # characters: a repository path (Linux PATH_MAX) or its short name
NAME_MAX = 64  # characters: a repository's short name, a status, an event type
LIST_MAX = 1000  # items: acceptance criteria
EVENT_TYPES_MAX = 256  # items: the event types a subscription filters on
PRIORITY_MAX = 1_000_000  # a task's priority: 1 (first) to this
MAX_ITERATIONS_MAX = 100  # a battle's maxIterations (the config's maxIterationsPerTask too)
ITERATION_MAX = 1_000_000  # an iteration number in battle.log
LOG_LIMIT_MAX = 4 << 20  # bytes of one battle.log reply
LOG_OFFSET_MAX = 1 << 53  # bytes into a log, either way (2**53: exact in every JSON reader)
LOG_TAIL_MAX = 1_000_000  # lines of battle.log's tail
COUNTER_MAX = (1 << 53) - 1  # versions, event sequence numbers, subscription ids

NO_NUL = r"^[^\x00]*$"

TaskId = Annotated[
    str, msgspec.Meta(pattern=wire_pattern(TASK_ID_PATTERN), max_length=TASK_ID_MAX_LEN)
]
DeliveryId = Annotated[
    str, msgspec.Meta(pattern=wire_pattern(DELIVERY_ID_PATTERN), max_length=DELIVERY_ID_MAX_LEN)
]
RepoRef = Annotated[str, msgspec.Meta(min_length=1, max_length=PATH_MAX, pattern=NO_NUL)]
"""A registered repository: its short name, or a path inside it (no NUL byte)."""
DirPath = Annotated[str, msgspec.Meta(min_length=1, max_length=PATH_MAX, pattern=NO_NUL)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=NAME_MAX)]
Title = Annotated[str, msgspec.Meta(min_length=1, max_length=TITLE_MAX)]
Text = Annotated[str, msgspec.Meta(max_length=TEXT_MAX)]
NonEmptyText = Annotated[str, msgspec.Meta(min_length=1, max_length=TEXT_MAX)]
Criteria = Annotated[list[NonEmptyText], msgspec.Meta(min_length=1, max_length=LIST_MAX)]
Priority = Annotated[int, msgspec.Meta(ge=1, le=PRIORITY_MAX)]
Version = Annotated[int, msgspec.Meta(ge=0, le=COUNTER_MAX)]
WaitSeconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_WAIT_SECONDS)]
"""A wait in seconds, 0 to one week (NaN and infinities fail the bounds)."""
TimeoutSeconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_WAIT_SECONDS)]
"""How long a blocking delivery waits: more than 0, at most one week."""


class Params(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """Base of all params structs."""


class NoParams(Params):
    pass


class RepoParams(Params):
    repo: RepoRef | None = None


# -- repositories
class RepoRegisterParams(Params):
    path: DirPath
    name: Name | None = None
    git_init: bool = False


# -- config
class ConfigUpdateParams(Params):
    """Keys to set in the repository layer (``null`` unsets one: user/default applies)."""

    patch: dict[str, Any]
    expected_version: Version | None = None
    repo: RepoRef | None = None


class ConfigUserUpdateParams(Params):
    """Keys to set in the user's layer (``null`` unsets one: the default applies)."""

    patch: dict[str, Any]
    expected_version: Version | None = None


# -- notifications
class NotifyTestParams(Params):
    """The channel to try (``desktop``, or a webhook's name); every one when omitted."""

    channel: Annotated[str, msgspec.Meta(min_length=1, max_length=40)] | None = None


# -- PRD
class PrdUpdateParams(Params):
    """Replace the PRD (``prd``) or change its name/description/metadata only."""

    prd: dict[str, Any] | None = None
    name: Title | None = None
    description: NonEmptyText | None = None
    metadata: dict[str, Any] | None = None
    expected_version: Version | None = None
    repo: RepoRef | None = None


# -- tasks
class TaskListParams(Params):
    status: Name | None = None
    repo: RepoRef | None = None


class TaskRef(Params):
    task_id: TaskId
    repo: RepoRef | None = None


DependsOn = Annotated[list[TaskId], msgspec.Meta(max_length=100)]


class TaskCreateParams(Params):
    title: Title
    description: NonEmptyText
    acceptance_criteria: Criteria
    priority: Priority | None = None
    id: TaskId | None = None
    expected_version: Version | None = None
    repo: RepoRef | None = None
    depends_on: DependsOn | None = None  # last: positional params keep their places


class TaskUpdateParams(Params):
    task_id: TaskId
    title: Title | None = None
    description: NonEmptyText | None = None
    acceptance_criteria: Criteria | None = None
    priority: Priority | None = None
    status: Name | None = None
    expected_version: Version | None = None
    repo: RepoRef | None = None
    depends_on: DependsOn | None = None  # the whole list ([] clears it); last, as above


class TaskDeleteParams(Params):
    task_id: TaskId
    expected_version: Version | None = None
    repo: RepoRef | None = None


# -- events
class SubscribeParams(Params):
    repo: RepoRef | None = None
    types: Annotated[list[Name], msgspec.Meta(max_length=EVENT_TYPES_MAX)] | None = None
    task_id: TaskId | None = None
    since: Annotated[int, msgspec.Meta(ge=0, le=COUNTER_MAX)] | None = None


class UnsubscribeParams(Params):
    subscription: Annotated[int, msgspec.Meta(ge=1, le=COUNTER_MAX)] | None = None


# -- battles
class BattleStartParams(Params):
    """One task's battle; or, with ``all``, every ready pending task (no taskId)."""

    task_id: TaskId | None = None
    mode: Literal["hitl", "yolo"] | None = None
    max_iterations: Annotated[int, msgspec.Meta(ge=1, le=MAX_ITERATIONS_MAX)] | None = None
    repo: RepoRef | None = None
    all: bool = False  # last: positional params keep their places


class BattleControlParams(Params):
    task_id: TaskId | None = None
    repo: RepoRef | None = None


class BattlePauseParams(Params):
    now: bool = False
    task_id: TaskId | None = None
    repo: RepoRef | None = None


class BattleResolveParams(Params):
    action: Literal["retry", "accept", "cancel"]
    guidance: Text | None = None  # for the implementer, with retry
    task_id: TaskId | None = None
    repo: RepoRef | None = None


class BattleApproveParams(Params):
    approve: bool = True
    note: Text | None = None
    task_id: TaskId | None = None
    repo: RepoRef | None = None


class BattleLogParams(Params):
    task_id: TaskId
    iteration: Annotated[int, msgspec.Meta(ge=1, le=ITERATION_MAX)] | None = None
    offset: Annotated[int, msgspec.Meta(ge=-LOG_OFFSET_MAX, le=LOG_OFFSET_MAX)] | None = None
    tail: Annotated[int, msgspec.Meta(ge=0, le=LOG_TAIL_MAX)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=LOG_LIMIT_MAX)] = 256 * 1024
    repo: RepoRef | None = None


class BattleReportParams(Params):
    """A verification or review report; ``cycle`` defaults to the latest."""

    task_id: TaskId
    phase: Literal["verification", "review"]
    cycle: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    repo: RepoRef | None = None


class BattleDiffParams(Params):
    task_id: TaskId
    iteration: Annotated[int, msgspec.Meta(ge=1, le=ITERATION_MAX)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=LOG_LIMIT_MAX)] = 512 * 1024
    repo: RepoRef | None = None


# -- inbox
class InboxListParams(Params):
    status: Name | None = None
    repo: RepoRef | None = None


class DeliveryRef(Params):
    id: DeliveryId
    repo: RepoRef | None = None


class InboxCreateParams(Params):
    title: Title
    body: Text = ""
    content_type: Literal["markdown", "text", "html"] = "markdown"
    mode: Literal["passive", "interactive", "blocking"] = "interactive"
    schema: dict[str, Any] | None = None
    timeout_seconds: TimeoutSeconds | None = None
    task_id: TaskId | None = None
    repo: RepoRef | None = None


class InboxAnswerParams(Params):
    id: DeliveryId
    values: dict[str, Any]
    note: Text | None = None
    repo: RepoRef | None = None


class InboxAnnotateParams(Params):
    id: DeliveryId
    content: NonEmptyText
    type: Literal["comment", "highlight"] = "comment"
    target: dict[str, Any] | None = None
    repo: RepoRef | None = None


class InboxWaitParams(Params):
    id: DeliveryId
    timeout: WaitSeconds | None = None
    repo: RepoRef | None = None


# -- planning
class PlanningStartParams(Params):
    idea: Text | None = None
    breakdown: bool = False
    repo: RepoRef | None = None


class PlanningAnswerParams(Params):
    answer: Text
    repo: RepoRef | None = None


class PlanningFinishParams(Params):
    save: bool = False
    merge: Literal["replace", "merge"] = "replace"
    repo: RepoRef | None = None


# -- debug (only with pokeralphd --debug-methods)
class DebugEmitParams(Params):
    count: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1
    size: Annotated[int, msgspec.Meta(ge=0, le=65536)] = 0


# -- config trust (config.trust; config.untrust takes RepoParams, config.trustList NoParams)
class ConfigTrustParams(Params):
    """Trust the repository layer as it is now; with ``hash``, only if it still has it."""

    hash: Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    repo: RepoRef | None = None


# -- approval rules (rules.list takes RepoParams)
RuleToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=TOOL_NAME_MAX)]
RuleIdParam = Annotated[str, msgspec.Meta(pattern=RULE_ID_RE, max_length=64)]


class RulesAddParams(Params):
    """A rule to add to the repository's layer (``scope: repo``) or the user's."""

    tool_name: RuleToolName
    param_pattern: Annotated[str, msgspec.Meta(min_length=1, max_length=PATTERN_MAX)]
    description: Annotated[str, msgspec.Meta(min_length=1, max_length=DESCRIPTION_MAX)]
    decision: Literal["allow", "deny"]
    scope: Literal["repo", "user"] = "repo"
    repo: RepoRef | None = None


class RulesRemoveParams(Params):
    id: RuleIdParam
    repo: RepoRef | None = None


class RulesTestParams(Params):
    """Which rule would decide a call of ``tool`` with ``input`` (any JSON value)."""

    tool: RuleToolName
    input: Any
    repo: RepoRef | None = None


# -- costs
Day = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}$")]


CostGroupBy = Literal["day", "repo", "task", "backend", "model", "phase"]


class CostSummaryParams(Params):
    by: CostGroupBy = "day"
    since: Day | None = None  # first day counted (UTC), inclusive
    until: Day | None = None  # last day counted (UTC), inclusive
    split: CostGroupBy | None = None  # each group's parts by this too (a day's repositories)
    repo: RepoRef | None = None
