"""A battle's phases after planning (seed 003): implementation → verification → review →
done, with bounded cycles, escalation to a person and transient blocks.

- Which phases run is the battle's ``phases`` (the config's, when it started); the
  implementation always runs first. Passing the last phase completes the battle (the
  seed's release phase is our commit, made by every iteration).
- A verification or review asking for changes sends its findings into the next
  implementation iteration's prompt (``battle.findings``) and the battle back to
  implementation. A report that could not be used (missing, not JSON, a criterion left
  out) runs the phase again instead: the implementer cannot act on it. Either way the
  cycle counts; when a phase has rejected ``limit`` times (3 verifications, 2 reviews by
  default) the battle is escalated.
- Escalated: a person answers the inbox item once: retry with guidance (new cycles,
  the guidance in every later implementation prompt), accept the work as it is
  (completed), or cancel. The answer is recorded in the battle's record before it is
  acted on, and acted on once (``resolution.applied``), so a daemon that stops in
  between acts on it after the restart, and a second answer is refused.
- Blocked: a transient failure (:mod:`pokeralphd.battle.transient`) waits out an
  exponential backoff (60 s, doubling, at most 30 min) on the engine's clock, then runs
  the same step again; it never counts as an iteration or a cycle. A rate limit waits
  for its reset however many times it comes; any other kind is retried
  ``transientRetries`` times in a row (4 by default), then escalated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pokeralph_core.timeutil import utcnow
from pokeralphd.battle.governor import endpoint_of
from pokeralphd.battle.transient import describe
from pokeralphd.domain.models import (
    Blocked,
    Escalation,
    Finding,
    Findings,
)
from pokeralphd.domain.reports import VerificationReport
from pokeralphd.domain.statuses import BattleStatus
from pokeralphd.errors import PokeralphError
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import anyio

    from pokeralph_core.config.model import AgentConfig, BattlePhase, Config, Phase
    from pokeralphd.agents.base import ApiFailure
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import EscalationReason
    from pokeralphd.domain.reports import ReviewReport

B = BattleStatus
BACKOFF_FIRST = 60.0  # seconds before the first retry
BACKOFF_CAP = 30 * 60.0


def backoff_delay(attempt: int) -> float:
    """The wait before retry number ``attempt`` (from 1): 60 s, 120 s, 240 s… at most 30 min."""
    return min(BACKOFF_FIRST * 2.0 ** (min(max(attempt, 1), 32) - 1), BACKOFF_CAP)


def when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def next_phase(phases: list[Phase], after: BattlePhase) -> BattlePhase:
    """The phase that follows ``after`` in ``phases`` (``done`` after the last one)."""
    order: list[BattlePhase] = [*phases, "done"]
    return order[order.index(after) + 1] if after in order[:-1] else "done"


def cycle_of(active: ActiveBattle, phase: BattlePhase) -> int | None:
    """The cycle a phase is at: the next report's number (None for the implementation)."""
    battle = active.battle
    if phase == "verification":
        return battle.verification.count + 1
    if phase == "review":
        return battle.review.count + 1
    return None


async def change_phase(
    orch: BattleControl, active: ActiveBattle, phase: BattlePhase, reason: str
) -> None:
    battle = active.battle
    previous = battle.phase
    battle.phase = phase
    await orch.save(active)
    orch.publish(
        ev.PhaseChanged(
            task_id=active.task_id,
            phase=phase,
            previous=previous,
            cycle=cycle_of(active, phase),
            reason=reason,
        )
    )


def findings_of(report: VerificationReport | ReviewReport, phase: Phase) -> Findings:
    """What a rejecting report asks the implementer to change."""
    items: list[Finding] = []
    if isinstance(report, VerificationReport):
        for c in report.acceptance_criteria:
            if c.status != "passed":
                items.append(
                    Finding(
                        severity="major",
                        description=f"acceptance criterion {c.id} ({c.criterion}) {c.status}: "
                        f"{c.evidence}",
                    )
                )
        for failure in report.test_results.failures[:20]:
            items.append(
                Finding(
                    severity="major",
                    description=f"test {failure.name} fails: {failure.error}",
                    file=failure.file,
                    line=failure.line,
                )
            )
        items += [
            Finding(
                severity=i.severity,
                description=i.description,
                file=i.file,
                line=i.line,
                suggestion=i.suggestion,
            )
            for i in report.feedback.items
        ]
        summary = report.feedback.summary
    else:
        ordered = sorted(report.comments, key=lambda c: not c.blocking)
        items = [
            Finding(
                severity="blocking" if c.blocking else c.severity,
                description=c.issue,
                file=c.file,
                line=c.line,
                suggestion=c.suggestion,
            )
            for c in ordered
        ]
        summary = report.feedback.message
    return Findings(phase=phase, cycle=report.cycle, summary=summary[:2000], items=items[:50])


# ----------------------------------------------------------------------------- blocked


@dataclass(frozen=True, slots=True)
class BlockedWait:
    """How a battle waits, ``blocked``: the record, the reason it goes on, and (for the
    governor) what ends the wait besides a command (given the mailbox's ``arrived``)."""

    blocked: Blocked
    resumed: str
    until: Callable[[anyio.Event], Awaitable[object]] | None = None


async def block(
    orch: BattleControl, active: ActiveBattle, failure: ApiFailure, config: Config
) -> BlockedWait | None:
    """How to wait out a transient failure (the same step runs again after it), or None
    when the retries ran out and the battle is escalated."""
    battle = active.battle
    clock = orch.host.clock
    endpoint = endpoint_of(agent_of(config, battle.phase))
    if failure.kind == "rate_limit":
        active.rate_limits += 1
        until = failure.resets_at or clock.time() + backoff_delay(active.rate_limits)
        orch.host.governor.limited(endpoint, until, f"{orch.repo.name}/{active.task_id}")
        detail = f" ({failure.status})" if failure.status is not None else ""
        blocked = Blocked(
            reason=f"rate limited{detail} until {when(until)}",
            kind=failure.kind,
            since=utcnow(),
            retry_at=until,
            retry=active.rate_limits,
        )
        return BlockedWait(blocked, "rate limit reset")
    active.rate_limits = 0
    battle.transient_failures += 1
    count = battle.transient_failures
    if count > config.transient_retries:
        await escalate(
            orch,
            active,
            "transient_failures",
            f"the agent failed {count} times in a row for a transient reason "
            f"({describe(failure)}: {failure.message[:300]}); answer to retry, accept the "
            "work as it is, or cancel",
        )
        return None
    until = clock.time() + backoff_delay(count)
    if failure.kind == "overloaded":  # the endpoint is overloaded for everyone
        orch.host.governor.limited(endpoint, until, f"{orch.repo.name}/{active.task_id}")
    blocked = Blocked(
        reason=f"the model API failed ({describe(failure)}); retrying at {when(until)} "
        f"(retry {count} of {config.transient_retries})",
        kind=failure.kind,
        since=utcnow(),
        retry_at=until,
        retry=count,
        max_retries=config.transient_retries,
    )
    return BlockedWait(blocked, f"retrying after a transient failure ({describe(failure)})")


def agent_of(config: Config, phase: str) -> AgentConfig:
    """The agent that runs ``phase``."""
    if phase == "verification":
        return config.role_agent("verifier")
    if phase == "review":
        return config.role_agent("reviewer")
    return config.agent


async def rate_wait(
    orch: BattleControl, active: ActiveBattle, config: Config
) -> BlockedWait | None:
    """Before an agent run: how to wait while another battle's rate limit holds this
    run's endpoint (see :mod:`pokeralphd.battle.governor`), or None to go on now."""
    governor = orch.host.governor
    endpoint = endpoint_of(agent_of(config, active.battle.phase))
    wait = governor.waits(endpoint)
    if wait is None:
        return None
    me = f"{orch.repo.name}/{active.task_id}"
    seen = "this battle" if wait.seen_by == me else f"the battle of {wait.seen_by}"
    blocked = Blocked(
        reason=f"rate limited on {endpoint.split(' ')[0]} (seen by {seen}) until "
        f"{when(wait.until)}; then battles go one by one in priority order",
        kind="rate_limit",
        since=utcnow(),
        retry_at=wait.until,
    )
    try:
        task, _ = await orch.repo.task(active.task_id)
        priority = task.priority
    except PokeralphError:
        priority = 1_000_000

    async def turn(interrupt: anyio.Event) -> None:
        await governor.turn(endpoint, priority, me, interrupt)

    return BlockedWait(blocked, "rate limit reset", turn)


def clear_transient(active: ActiveBattle) -> None:
    """A step ended for a reason of its own: the transient failures in a row are over."""
    active.rate_limits = 0
    active.battle.transient_failures = 0


# ----------------------------------------------------------------------------- escalation


async def escalate(
    orch: BattleControl, active: ActiveBattle, reason: EscalationReason, message: str
) -> None:
    """Escalate to a person (seed 003): the battle waits, escalated, for their answer."""
    battle = active.battle
    phase: Phase = battle.phase if battle.phase != "done" else battle.phases[-1]
    escalation = Escalation(
        number=len(battle.escalations) + 1,
        at=utcnow(),
        phase=phase,
        reason=reason,
        message=message,
    )
    battle.escalations.append(escalation)
    await orch.set_status(active, B.ESCALATED)
    for hook in orch.host.escalation_hooks:
        await hook.opened(orch, active, escalation)
    orch.publish(ev.BattleEscalated(task_id=active.task_id, escalation=escalation.dump()))


def open_escalation(active: ActiveBattle) -> Escalation | None:
    """The escalation a person has not answered yet, if any."""
    battle = active.battle
    if battle.escalations and battle.escalations[-1].resolution is None:
        return battle.escalations[-1]
    return None


def pending_resolution(active: ActiveBattle) -> Escalation | None:
    """An escalation answered but not yet acted on."""
    battle = active.battle
    if battle.escalations:
        last = battle.escalations[-1]
        if last.resolution is not None and not last.resolution.applied:
            return last
    return None


def escalated_hint(active: ActiveBattle) -> str:
    """What a person does with an escalated battle (pause and resume do not apply)."""
    escalation = open_escalation(active)
    where = (
        f"answer inbox item {escalation.delivery_id} "
        f"(`pokeralphctl inbox show {escalation.delivery_id}`)"
        if escalation is not None and escalation.delivery_id
        else "answer its inbox item"
    )
    return (
        f"the battle for {active.task_id} is escalated and waits for a person: {where} "
        "to retry with guidance, accept the work, or cancel"
    )


async def apply_resolution(orch: BattleControl, active: ActiveBattle, config: Config) -> str | None:
    """Act on a person's answer to an escalation, once: ``accept`` or ``cancel`` (the
    battle ends; the caller completes or cancels it), or None (retry, or nothing to do)."""
    escalation = pending_resolution(active)
    if escalation is None or escalation.resolution is None:
        return None
    resolution = escalation.resolution
    battle = active.battle
    resolution.applied = True
    if resolution.action != "retry":
        await orch.save(active)
        return resolution.action
    if resolution.guidance:
        battle.guidance = resolution.guidance.strip()[:8000]
    clear_transient(active)
    phase: BattlePhase = battle.phase
    if escalation.reason == "verification_cycles":
        battle.verification.limit = battle.verification.count + config.max_verification_cycles
        phase = "implementation"
    elif escalation.reason == "review_cycles":
        battle.review.limit = battle.review.count + config.max_review_cycles
        phase = "implementation"
    if phase != battle.phase:
        await change_phase(orch, active, phase, "retry with a person's guidance")
    else:
        await orch.save(active)
    return None
