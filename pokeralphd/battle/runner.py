"""The battle loop of one task: iterate until complete, failed, paused or cancelled.

HITL waits for approval after every iteration; YOLO runs on. Pause takes effect between
iterations (or at once with ``now``); only iterations that really ran (success, failure,
timeout) count against the maximum.

The API's refusals never burn iterations. A rejected rate limit, or a 429 (which with
API-key auth comes without a rate_limit_event), pauses until the reset the CLI named, else
for a backoff (60 s, doubling, at most 30 min), then goes on by itself. An overloaded
(529) or failing (5xx) API is retried after the same backoff; after
``TRANSIENT_LIMIT`` such failures in a row the battle pauses until a person resumes it.
Every timed wait runs on the engine's clock and ends early on ``battle.resume``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from pokeralphd.battle.iteration import IterationRun
from pokeralphd.clock import wait_or_timeout
from pokeralphd.domain.statuses import BattleStatus, ExecutionMode, IterationResult

if TYPE_CHECKING:
    from pokeralphd.agents.base import ApiFailure
    from pokeralphd.battle.state import ActiveBattle, BattleControl

log = logging.getLogger(__name__)
B = BattleStatus
COUNTED = frozenset({IterationResult.SUCCESS, IterationResult.FAILURE, IterationResult.TIMEOUT})
BACKOFF_FIRST = 60.0  # seconds before the first retry
BACKOFF_CAP = 30 * 60.0
TRANSIENT_LIMIT = 5  # overloaded/server failures in a row before the battle pauses for good


def backoff_delay(attempt: int) -> float:
    """The wait before retry number ``attempt`` (from 1): 60 s, 120 s, 240 s… at most 30 min."""
    return min(BACKOFF_FIRST * 2.0 ** (min(max(attempt, 1), 32) - 1), BACKOFF_CAP)


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _describe(failure: ApiFailure) -> str:
    what = {"rate_limit": "rate limited", "overloaded": "overloaded", "server": "server error"}
    status = f" {failure.status}" if failure.status is not None else ""
    return f"{what[failure.kind]}{status}"


async def run_battle(orch: BattleControl, active: ActiveBattle, paused: bool) -> None:
    """Drive ``active`` to a terminal state (or leave it paused at daemon shutdown)."""
    try:
        with active.runner_scope:
            if paused:
                await _wait_resume(orch, active)
            await _acquire_and_loop(orch, active)
    except Exception as exc:  # a bug or a broken file: the battle fails, the daemon goes on
        log.exception("battle %s in %s crashed", active.task_id, orch.repo.name)
        with anyio.CancelScope(shield=True):
            try:
                await _fail(orch, active, f"internal error: {exc}")
            except Exception:
                log.exception("recording the failure of %s failed too", active.task_id)
                orch.publish(
                    "battle_failed",
                    {
                        "error": f"internal error: {exc}",
                        "iterations": len(active.battle.iterations),
                    },
                    active.task_id,
                )
    finally:
        with anyio.CancelScope(shield=True):
            await _settle(orch, active)


async def _acquire_and_loop(orch: BattleControl, active: ActiveBattle) -> None:
    engine = orch.host
    while True:
        if not engine.slot_free():
            active.queued = True
            await orch.set_status(active, B.QUEUED)
            orch.publish("battle_queued", {"position": engine.waiting + 1}, active.task_id)
        async with engine.slot():
            active.queued = False
            resumed = active.battle.iterations or active.battle.status == B.PAUSED
            await orch.set_status(active, B.RUNNING, paused_reason=None)
            if resumed:
                orch.publish(
                    "battle_resumed",
                    {"iteration": active.progress.current_iteration},
                    active.task_id,
                )
            else:
                orch.publish(
                    "battle_start",
                    {
                        "mode": active.battle.mode.value,
                        "maxIterations": active.battle.max_iterations,
                    },
                    active.task_id,
                )
            done = await _loop(orch, active)
        if done:
            return
        await _wait_resume(orch, active)  # paused between iterations: wait, then take a slot again


async def _loop(orch: BattleControl, active: ActiveBattle) -> bool:
    """Run iterations; True when the battle reached a terminal state, False when paused."""
    battle = active.battle
    clock = orch.host.clock
    rate_limits = transient = 0  # API refusals in a row, for the backoff
    while True:
        if active.pause_requested:
            await _pause(orch, active, "paused at your request")
            return False
        config = await orch.repo.config()
        limit = battle.max_iterations or config.max_iterations_per_task
        number = max((i.number for i in battle.iterations), default=0) + 1
        verdict = await IterationRun(orch, active, number, config).run()
        if verdict.fatal:
            await _fail(orch, active, verdict.fatal)
            return True
        if verdict.completed:
            await orch.set_status(active, B.COMPLETED)
            orch.publish(
                "battle_complete",
                {
                    "iterations": len(battle.iterations),
                    "costUsd": round(battle.cost_usd, 6),
                    "completion": verdict.iteration.completion.dump()
                    if verdict.iteration.completion
                    else None,
                },
                active.task_id,
            )
            return True
        counted = sum(1 for i in battle.iterations if i.result in COUNTED)
        if counted >= limit:
            await _fail(orch, active, f"max iterations ({limit}) reached without completion")
            return True
        if verdict.rate_limited_until is not None:
            await _rate_limit_pause(orch, active, verdict.rate_limited_until)
            continue
        failure = verdict.api_failure
        rate_limits = rate_limits + 1 if failure and failure.kind == "rate_limit" else 0
        transient = transient + 1 if failure and failure.kind != "rate_limit" else 0
        if failure is not None and failure.kind == "rate_limit":
            until = failure.resets_at or clock.time() + backoff_delay(rate_limits)
            detail = f" ({failure.status})" if failure.status is not None else ""
            await _rate_limit_pause(orch, active, until, detail)
            continue
        if failure is not None and transient >= TRANSIENT_LIMIT:
            await _pause(
                orch,
                active,
                f"the model API failed {transient} times in a row ({_describe(failure)}: "
                f"{failure.message[:200]}); resume with `pokeralphctl battle resume`",
            )
            return False
        if failure is not None:
            until = clock.time() + backoff_delay(transient)
            await _timed_pause(
                orch,
                active,
                f"the model API failed ({_describe(failure)}); retrying at {_when(until)} "
                f"(failure {transient} of {TRANSIENT_LIMIT} in a row)",
                until,
                "retrying after an API failure",
            )
            continue
        if active.pause_requested or active.stop_reason == "pause_now":
            active.clear_pause_now()
            await _pause(
                orch,
                active,
                "paused immediately at your request"
                if verdict.iteration.result == IterationResult.CANCELLED
                else "paused at your request",
            )
            return False
        if battle.mode == ExecutionMode.HITL:
            approved = await _await_approval(orch, active, verdict.iteration.number)
            if not approved:
                await _pause(
                    orch,
                    active,
                    "iteration rejected"
                    + (f": {active.approval_note}" if active.approval_note else ""),
                )
                return False


async def _await_approval(orch: BattleControl, active: ActiveBattle, number: int) -> bool:
    active.approval_event = anyio.Event()
    active.approved = True
    await orch.set_status(active, B.AWAITING_APPROVAL)
    record = active.battle.iterations[-1]
    orch.publish(
        "await_approval",
        {
            "iteration": number,
            "result": record.result.value,
            "completion": record.completion.dump() if record.completion else None,
            "feedback": {k: v.passed for k, v in record.feedback_results.items() if not v.skipped},
            "filesChanged": record.files_changed,
            "commitHash": record.commit_hash,
        },
        active.task_id,
    )
    hooks = orch.host.approval_hooks
    for hook in hooks:
        await hook.opened(orch, active, number)
    await active.approval_event.wait()
    for hook in hooks:
        await hook.closed(orch, active, number)
    if active.pause_requested and active.approved:
        return False  # battle.pause while awaiting approval
    orch.publish(
        "approval_received",
        {"iteration": number, "approved": active.approved, "note": active.approval_note},
        active.task_id,
    )
    if active.approved:
        await orch.set_status(active, B.RUNNING)
    return active.approved


async def _pause(orch: BattleControl, active: ActiveBattle, reason: str) -> None:
    await orch.set_status(active, B.PAUSED, paused_reason=reason)
    orch.publish("battle_paused", {"reason": reason}, active.task_id)


async def _wait_resume(orch: BattleControl, active: ActiveBattle) -> None:
    await active.resume_event.wait()
    active.pause_requested = False


async def _rate_limit_pause(
    orch: BattleControl, active: ActiveBattle, until: float, detail: str = ""
) -> None:
    await _timed_pause(
        orch, active, f"rate limited{detail} until {_when(until)}", until, "rate limit reset"
    )


async def _timed_pause(
    orch: BattleControl, active: ActiveBattle, reason: str, until: float, resumed: str
) -> None:
    """Paused until ``until`` on the engine's clock (``rateLimitedUntil`` in the event:
    when the battle goes on by itself), or until a person resumes it earlier."""
    await orch.set_status(active, B.PAUSED, paused_reason=reason)
    orch.publish("battle_paused", {"reason": reason, "rateLimitedUntil": until}, active.task_id)
    clock = orch.host.clock
    await wait_or_timeout(active.resume_event, clock, until - clock.time())
    active.pause_requested = False
    await orch.set_status(active, B.RUNNING, paused_reason=None)
    orch.publish("battle_resumed", {"reason": resumed}, active.task_id)


async def _fail(orch: BattleControl, active: ActiveBattle, error: str) -> None:
    if active.battle.status in (B.COMPLETED, B.FAILED, B.CANCELLED):
        return
    if active.battle.status != B.RUNNING:
        await orch.set_status(active, B.RUNNING)
    await orch.set_status(active, B.FAILED, error=error)
    orch.publish(
        "battle_failed",
        {"error": error, "iterations": len(active.battle.iterations)},
        active.task_id,
    )
    for hook in orch.host.failure_hooks:
        await hook(orch, active)


async def _settle(orch: BattleControl, active: ActiveBattle) -> None:
    """After the runner ends, the battle always has a final word: a cancel is recorded as
    cancelled; at shutdown it is left paused (resumable after the restart); a runner that
    ended any other way without a final status is recorded as failed."""
    try:
        status = active.battle.status
        if status not in (B.COMPLETED, B.FAILED, B.CANCELLED):
            if active.stop_reason == "cancel":
                await orch.set_status(active, B.CANCELLED)
                orch.publish(
                    "battle_cancelled",
                    {"iterations": len(active.battle.iterations)},
                    active.task_id,
                )
            elif active.stop_reason == "shutdown":
                if status != B.PAUSED:
                    reason = "the daemon stopped; resume with `pokeralphctl battle resume`"
                    await orch.set_status(active, B.PAUSED, paused_reason=reason)
                    orch.publish("battle_paused", {"reason": reason}, active.task_id)
            else:
                await _fail(orch, active, "the battle's runner stopped unexpectedly")
    finally:
        if active.stop_reason != "shutdown":
            orch.release(active)
        active.finished.set()
