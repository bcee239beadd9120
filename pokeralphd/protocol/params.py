"""Parameter types of every JSON-RPC method (msgspec structs, camelCase on the wire).

These are the single source of the method signatures: the dispatcher decodes params
into them, and ``rpc.discover`` / ``shared/openrpc.json`` are generated from them.
Field order is the order for params by position; ``repo`` (a path inside the
repository, or its short name) always comes last so it can be left out.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Params(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """Base of all params structs."""


class NoParams(Params):
    pass


class RepoParams(Params):
    repo: str | None = None


# -- repositories
class RepoRegisterParams(Params):
    path: str
    name: str | None = None
    git_init: bool = False


# -- config
class ConfigUpdateParams(Params):
    """Keys to set in the repository layer (``null`` unsets one: user/default applies)."""

    patch: dict[str, Any]
    expected_version: int | None = None
    repo: str | None = None


# -- PRD
class PrdUpdateParams(Params):
    """Replace the PRD (``prd``) or change its name/description/metadata only."""

    prd: dict[str, Any] | None = None
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    expected_version: int | None = None
    repo: str | None = None


# -- tasks
class TaskListParams(Params):
    status: str | None = None
    repo: str | None = None


class TaskRef(Params):
    task_id: str
    repo: str | None = None


class TaskCreateParams(Params):
    title: str
    description: str
    acceptance_criteria: list[str]
    priority: int | None = None
    id: str | None = None
    expected_version: int | None = None
    repo: str | None = None


class TaskUpdateParams(Params):
    task_id: str
    title: str | None = None
    description: str | None = None
    acceptance_criteria: list[str] | None = None
    priority: int | None = None
    status: str | None = None
    expected_version: int | None = None
    repo: str | None = None


class TaskDeleteParams(Params):
    task_id: str
    expected_version: int | None = None
    repo: str | None = None


# -- events
class SubscribeParams(Params):
    repo: str | None = None
    types: list[str] | None = None
    task_id: str | None = None
    since: int | None = None


class UnsubscribeParams(Params):
    subscription: int | None = None


# -- battles
class BattleStartParams(Params):
    task_id: str
    mode: Literal["hitl", "yolo"] | None = None
    max_iterations: int | None = None
    repo: str | None = None


class BattleControlParams(Params):
    task_id: str | None = None
    repo: str | None = None


class BattlePauseParams(Params):
    now: bool = False
    task_id: str | None = None
    repo: str | None = None


class BattleApproveParams(Params):
    approve: bool = True
    note: str | None = None
    task_id: str | None = None
    repo: str | None = None


class BattleLogParams(Params):
    task_id: str
    iteration: int | None = None
    offset: int | None = None
    tail: int | None = None
    limit: int = 256 * 1024
    repo: str | None = None


# -- inbox
class InboxListParams(Params):
    status: str | None = None
    repo: str | None = None


class DeliveryRef(Params):
    id: str
    repo: str | None = None


class InboxCreateParams(Params):
    title: str
    body: str = ""
    mode: Literal["passive", "interactive", "blocking"] = "interactive"
    schema: dict[str, Any] | None = None
    timeout_seconds: float | None = None
    task_id: str | None = None
    repo: str | None = None


class InboxAnswerParams(Params):
    id: str
    values: dict[str, Any]
    note: str | None = None
    repo: str | None = None


class InboxAnnotateParams(Params):
    id: str
    content: str
    type: Literal["comment", "highlight"] = "comment"
    target: dict[str, Any] | None = None
    repo: str | None = None


class InboxWaitParams(Params):
    id: str
    timeout: float | None = None
    repo: str | None = None


# -- planning
class PlanningStartParams(Params):
    idea: str | None = None
    breakdown: bool = False
    repo: str | None = None


class PlanningAnswerParams(Params):
    answer: str
    repo: str | None = None


class PlanningFinishParams(Params):
    save: bool = False
    merge: Literal["replace", "merge"] = "replace"
    repo: str | None = None


# -- debug (only with pokeralphd --debug-methods)
class DebugEmitParams(Params):
    count: int = 1
    size: int = 0


# -- config trust (config.trust; config.untrust takes RepoParams, config.trustList NoParams)
class ConfigTrustParams(Params):
    """Trust the repository layer as it is now; with ``hash``, only if it still has it."""

    hash: str | None = None
    repo: str | None = None
