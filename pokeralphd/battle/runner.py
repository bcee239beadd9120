"""The battle loop of one task: run its phases until complete, failed, paused, escalated
or cancelled.

The implementation runs iterations: HITL waits for approval after every iteration, YOLO
runs on. Pause takes effect between iterations (or at once with ``now``); only
iterations that really ran (success, failure, timeout) count against the maximum. Once
an iteration's completion is accepted, the battle goes through its further phases
(verification, review: :mod:`pokeralphd.battle.phases`), each a role's run
(:mod:`pokeralphd.battle.roles`).

Transient failures never burn iterations or cycles: the battle is ``blocked`` for a
backoff and the same step runs again (see :func:`pokeralphd.battle.phases.block`); past
the retries it is escalated. An escalated battle gives its slot back and waits for a
person's answer (``resume_event``), like a paused one. Every timed wait runs on the
engine's clock and ends early on ``battle.resume``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from pokeralphd.battle import budget, phases
from pokeralphd.battle.iteration import IterationRun
from pokeralphd.battle.roles import RoleRun, cycles_of
from pokeralphd.domain.statuses import BattleStatus, ExecutionMode, IterationResult, battle_path

if TYPE_CHECKING:
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import Config, Phase

log = logging.getLogger(__name__)
B = BattleStatus
COUNTED = frozenset({IterationResult.SUCCESS, IterationResult.FAILURE, IterationResult.TIMEOUT})


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
    """Run the battle's phases; True when it reached a terminal state, False when it
    paused or was escalated (it waits for a resume or an answer without a slot)."""
    battle = active.battle
    while True:
        if active.pause_requested:
            await _pause(orch, active, "paused at your request")
            return False
        config = await orch.repo.config()
        decided = await phases.apply_resolution(orch, active, config)
        if decided == "accept":
            # accepting a merge conflict: complete, the branch left for the person to merge
            last = battle.escalations[-1] if battle.escalations else None
            merge = last is None or last.reason != "merge_conflict"
            if battle.phase != "done":
                await phases.change_phase(orch, active, "done", "a person accepted the work")
            return await _complete(orch, active, merge=merge)
        if decided == "cancel":
            active.request_stop("cancel")
            await orch.set_status(active, B.CANCELLED)
            orch.publish("battle_cancelled", {"iterations": len(battle.iterations)}, active.task_id)
            return True
        if battle.phase == "done":  # every phase passed before a restart (or a retried merge)
            return await _complete(orch, active)
        if await _over_budget(orch, active, config):
            return False
        await phases.governed(orch, active, config)
        if active.pause_requested:
            continue
        if battle.phase == "implementation":
            step = await _implementation(orch, active, config)
        else:
            step = await _role(orch, active, config, battle.phase)
        if step is not None:
            return step


async def _over_budget(orch: BattleControl, active: ActiveBattle, config: Config) -> bool:
    """Before an agent run: if it would pass a spending cap, pause (and ask) instead."""
    over = budget.overrun(orch, active, config)
    if over is None:
        return False
    await budget.offer_more(orch, active, over)
    await _pause(orch, active, over.reason)
    return True


async def _implementation(orch: BattleControl, active: ActiveBattle, config: Config) -> bool | None:
    """One implementation iteration; None to go on, else what ``_loop`` returns."""
    battle = active.battle
    limit = battle.max_iterations or config.max_iterations_per_task
    number = max((i.number for i in battle.iterations), default=0) + 1
    verdict = await IterationRun(orch, active, number, config).run()
    if verdict.fatal:
        await _fail(orch, active, verdict.fatal)
        return True
    if verdict.completed:
        phases.clear_transient(active)
        return await _advance(orch, active, "implementation")
    counted = sum(1 for i in battle.iterations if i.result in COUNTED)
    if counted >= limit:
        await _fail(orch, active, f"max iterations ({limit}) reached without completion")
        return True
    failure = verdict.api_failure
    if failure is not None:
        return None if await phases.block(orch, active, failure, config) else False
    if verdict.iteration.result != IterationResult.CANCELLED:
        phases.clear_transient(active)
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
    return None


async def _role(
    orch: BattleControl, active: ActiveBattle, config: Config, phase: Phase
) -> bool | None:
    """One verification or review run; None to go on, else what ``_loop`` returns."""
    assert phase != "implementation"
    battle = active.battle
    verdict = await RoleRun(orch, active, phase, config).run()
    if verdict.fatal:
        await _fail(orch, active, verdict.fatal)
        return True
    if verdict.stopped:
        active.clear_pause_now()
        await _pause(orch, active, f"paused immediately at your request (during {phase})")
        return False
    if verdict.transient is not None:
        return None if await phases.block(orch, active, verdict.transient, config) else False
    phases.clear_transient(active)
    report = verdict.report
    assert report is not None
    if verdict.passed:
        battle.findings = None
        return await _advance(orch, active, phase)
    if report.valid:  # what it asks for: for the implementer, and for the person
        battle.findings = phases.findings_of(report, phase)
    cycles = cycles_of(active, phase)
    if cycles.count >= cycles.limit:
        what = "verifications" if phase == "verification" else "reviews"
        await phases.escalate(
            orch,
            active,
            "verification_cycles" if phase == "verification" else "review_cycles",
            f"{cycles.count} {what} did not pass (the last: "
            f"{report.problem or 'changes requested'}); answer to retry with guidance, "
            "accept the work as it is, or cancel",
        )
        return False
    if report.valid:
        await phases.change_phase(orch, active, "implementation", f"the {phase} asked for changes")
    # an unusable report: the same phase runs again (the implementer cannot act on it)
    return None


async def _advance(orch: BattleControl, active: ActiveBattle, after: Phase) -> bool | None:
    """``after`` passed: on to the next phase (None), or complete the battle (True)."""
    following = phases.next_phase(active.battle.phases, after)
    await phases.change_phase(orch, active, following, f"the {after} passed")
    if following == "done":
        return await _complete(orch, active)
    return None


async def _complete(orch: BattleControl, active: ActiveBattle, *, merge: bool = True) -> bool:
    """Complete the battle: True; or, for a worktree battle whose branch cannot be merged
    back, escalate to a person naming why and the files (False: it waits)."""
    battle = active.battle
    if merge:
        problem = await orch.merge_back(active)
        if problem is not None:
            await phases.escalate(
                orch,
                active,
                "merge_conflict",
                # the cause only: the inbox item and `battle show` say what each answer does
                problem,
            )
            return False
    if battle.status != B.RUNNING:
        await orch.set_status(active, B.RUNNING)
    await orch.set_status(active, B.COMPLETED)
    completion = next((i.completion for i in reversed(battle.iterations) if i.completion), None)
    orch.publish(
        "battle_complete",
        {
            "iterations": len(battle.iterations),
            "costUsd": round(battle.cost_usd, 6),
            "completion": completion.dump() if completion else None,
        },
        active.task_id,
    )
    return True


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
                # an escalated battle stays so: the person's answer is still awaited
                if status not in (B.PAUSED, B.ESCALATED):
                    reason = "the daemon stopped; resume with `pokeralphctl battle resume`"
                    for step in battle_path(status, B.PAUSED):
                        await orch.set_status(
                            active, step, paused_reason=reason if step == B.PAUSED else None
                        )
                    orch.publish("battle_paused", {"reason": reason}, active.task_id)
            else:
                await _fail(orch, active, "the battle's runner stopped unexpectedly")
        escalation = phases.open_escalation(active)
        if escalation is not None and active.battle.status in (B.COMPLETED, B.FAILED, B.CANCELLED):
            for hook in orch.host.escalation_hooks:
                await hook.closed(
                    orch, active, escalation, f"the battle was {active.battle.status}"
                )
    finally:
        if active.stop_reason != "shutdown":
            orch.release(active)
        active.finished.set()
