"""Task, battle and progress statuses, their allowed transitions, and the mapping between them.

The diagrams come from the data-model seed (``000_…``), with ``blocked`` and ``escalated``
from the autonomous-team seed (``003_…``, its status table): an illegal transition raises
:class:`IllegalTransition` instead of silently overwriting a status.

- ``blocked``: a transient failure (the model API overloaded or failing, a lost
  connection, the agent's exit code 23 or 124) is being retried after a backoff. It goes
  back to in progress (the retry), or fails; a cancel ends it.
- ``escalated``: the bounded loops ran out (verification or review cycles, transient
  retries): a person decides (retry with guidance, accept the work, or cancel). It goes
  back to in progress, fails, or is cancelled; the person's answer is consumed once.

The seed's ``* -> cancelled`` is ours as it was before: a cancelled battle leaves its
task ``paused`` (seed 000's mapping), so a blocked or escalated task may become paused.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    PENDING = "pending"
    PLANNING = "planning"
    IN_PROGRESS = "in_progress"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"  # seed 003
    ESCALATED = "escalated"  # seed 003


class BattleStatus(StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"  # seed 003: a transient failure, retried after a backoff
    ESCALATED = "escalated"  # seed 003: waiting for a person's decision


class ProgressStatus(StrEnum):
    IDLE = "idle"
    IN_PROGRESS = "in_progress"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"


class IterationResult(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class IllegalTransition(ValueError):
    """Raised when a status change is not an edge of its state machine."""

    def __init__(self, kind: str, old: str, new: str) -> None:
        self.kind = kind
        self.old = old
        self.new = new
        super().__init__(f"illegal {kind} status transition: {old} -> {new}")


T = TaskStatus
TASK_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    T.PENDING: frozenset({T.PLANNING, T.IN_PROGRESS}),
    T.PLANNING: frozenset({T.PENDING}),
    # Paused -> Completed/Failed is not in the seed diagram; a paused battle can only
    # resume or be cancelled, so neither is allowed here either.
    T.IN_PROGRESS: frozenset({T.PAUSED, T.COMPLETED, T.FAILED, T.BLOCKED, T.ESCALATED}),
    T.PAUSED: frozenset({T.IN_PROGRESS, T.PENDING}),
    T.COMPLETED: frozenset(),
    T.FAILED: frozenset({T.PENDING}),
    # seed 003; paused stands for the seed's cancelled (see the module's docstring)
    T.BLOCKED: frozenset({T.IN_PROGRESS, T.FAILED, T.PAUSED}),
    T.ESCALATED: frozenset({T.IN_PROGRESS, T.FAILED, T.PAUSED}),
}

B = BattleStatus
BATTLE_TRANSITIONS: dict[BattleStatus, frozenset[BattleStatus]] = {
    # ``queued`` is ours: a battle waiting for a daemon-wide slot. A battle that has not
    # run yet may also be paused (asked to, or found so after a daemon restart).
    B.PENDING: frozenset({B.RUNNING, B.QUEUED, B.PAUSED, B.CANCELLED}),
    B.QUEUED: frozenset({B.RUNNING, B.PAUSED, B.CANCELLED}),
    B.RUNNING: frozenset(
        {B.PAUSED, B.AWAITING_APPROVAL, B.COMPLETED, B.FAILED, B.CANCELLED, B.BLOCKED, B.ESCALATED}
    ),
    B.PAUSED: frozenset({B.RUNNING, B.QUEUED, B.CANCELLED}),
    B.AWAITING_APPROVAL: frozenset({B.RUNNING, B.CANCELLED, B.PAUSED}),
    B.COMPLETED: frozenset(),
    B.FAILED: frozenset(),
    B.CANCELLED: frozenset(),
    # seed 003: back to running (the retry, the person's answer), failed, or cancelled
    B.BLOCKED: frozenset({B.RUNNING, B.FAILED, B.CANCELLED}),
    B.ESCALATED: frozenset({B.RUNNING, B.FAILED, B.CANCELLED}),
}

P = ProgressStatus
PROGRESS_TRANSITIONS: dict[ProgressStatus, frozenset[ProgressStatus]] = {
    P.IDLE: frozenset({P.IN_PROGRESS, P.FAILED}),  # failed: while blocked or escalated
    P.IN_PROGRESS: frozenset({P.AWAITING_APPROVAL, P.COMPLETED, P.FAILED, P.IDLE}),
    P.AWAITING_APPROVAL: frozenset({P.IN_PROGRESS, P.IDLE}),
    P.COMPLETED: frozenset(),
    P.FAILED: frozenset({P.IDLE}),
}

# The seed's proposed mapping ("Status Overlap Issue"); ``queued`` is pending.
BATTLE_TO_TASK_STATUS: dict[BattleStatus, TaskStatus] = {
    B.PENDING: T.PENDING,
    B.QUEUED: T.PENDING,
    B.RUNNING: T.IN_PROGRESS,
    B.PAUSED: T.PAUSED,
    B.AWAITING_APPROVAL: T.IN_PROGRESS,
    B.COMPLETED: T.COMPLETED,
    B.FAILED: T.FAILED,
    B.CANCELLED: T.PAUSED,
    B.BLOCKED: T.BLOCKED,
    B.ESCALATED: T.ESCALATED,
}

TERMINAL_BATTLE_STATUSES = frozenset({B.COMPLETED, B.FAILED, B.CANCELLED})

# What progress.json says while the battle is in each status (idle: not working now).
BATTLE_TO_PROGRESS_STATUS: dict[BattleStatus, ProgressStatus] = {
    B.PENDING: P.IDLE,
    B.QUEUED: P.IDLE,
    B.RUNNING: P.IN_PROGRESS,
    B.PAUSED: P.IDLE,
    B.AWAITING_APPROVAL: P.AWAITING_APPROVAL,
    B.COMPLETED: P.COMPLETED,
    B.FAILED: P.FAILED,
    B.CANCELLED: P.IDLE,
    B.BLOCKED: P.IDLE,
    B.ESCALATED: P.IDLE,
}


def check_task_transition(old: TaskStatus, new: TaskStatus) -> TaskStatus:
    """Return ``new`` if ``old -> new`` is allowed (or a no-op), else raise."""
    if old != new and new not in TASK_TRANSITIONS[old]:
        raise IllegalTransition("task", old, new)
    return new


def check_battle_transition(old: BattleStatus, new: BattleStatus) -> BattleStatus:
    """Return ``new`` if ``old -> new`` is allowed (or a no-op), else raise."""
    if old != new and new not in BATTLE_TRANSITIONS[old]:
        raise IllegalTransition("battle", old, new)
    return new


def check_progress_transition(old: ProgressStatus, new: ProgressStatus) -> ProgressStatus:
    """Return ``new`` if ``old -> new`` is allowed (or a no-op), else raise."""
    if old != new and new not in PROGRESS_TRANSITIONS[old]:
        raise IllegalTransition("progress", old, new)
    return new


def battle_path(old: BattleStatus, new: BattleStatus) -> list[BattleStatus]:
    """The legal sequence of battle statuses from ``old`` to ``new``: ``[new]`` when the
    edge exists, else through ``running`` (a blocked battle that is paused goes back to
    running first, as the seed's table has it), else :class:`IllegalTransition`."""
    if old == new:
        return []
    if new in BATTLE_TRANSITIONS[old]:
        return [new]
    if B.RUNNING in BATTLE_TRANSITIONS[old] and new in BATTLE_TRANSITIONS[B.RUNNING]:
        return [B.RUNNING, new]
    raise IllegalTransition("battle", old, new)


def task_path_for_battle(task: TaskStatus, battle: BattleStatus) -> list[TaskStatus]:
    """The legal sequence of task statuses from ``task`` to what ``battle`` implies.

    A battle started again after a failure first moves the task back to pending
    (``Failed -> Pending: Retry task``); a cancelled battle maps to paused per the seed.
    An impossible path (say, anything out of ``completed``) raises :class:`IllegalTransition`.
    """
    target = BATTLE_TO_TASK_STATUS[battle]
    if task == target:
        return []
    if target in TASK_TRANSITIONS[task]:
        return [target]
    for middle in sorted(TASK_TRANSITIONS[task]):
        if target in TASK_TRANSITIONS[middle]:
            return [middle, target]
    raise IllegalTransition("task", task, target)
