"""Where battles need a person, through the inbox.

- Each HITL approval is a blocking ``confirm`` delivery; answering it approves or rejects
  the iteration (a note goes into the next prompt; a rejection pauses the battle), and a
  ``battle.approve`` from elsewhere settles the delivery with the same answer.
- A battle that fails at max iterations leaves an interactive ``select`` delivery offering
  a retry with more iterations, or stop.
- An escalated battle (seed 003: its verification or review cycles, or its transient
  retries, ran out) asks with a blocking ``form``: what to do (retry with the guidance,
  accept the work as it is, or cancel) and guidance for the implementer. The answer goes
  to the battle once (a second answer is refused by the inbox, and by the battle); a
  daemon restarted meanwhile listens again, and acts on an answer it missed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pokeralphd.domain.inbox import Delivery, Feedback, Source
from pokeralphd.errors import PokeralphError
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from pokeralphd.battle.commands import Approve
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import Escalation, EscalationAction

RETRY_MORE = 5
AnswerHandler = Callable[[Delivery, Feedback], Awaitable[None]]


def _approval_body(active: ActiveBattle, iteration: int) -> str:
    record = next((i for i in active.battle.iterations if i.number == iteration), None)
    lines = [f"**{active.task_id}: {active.title}**, iteration {iteration}", ""]
    if record is None:
        return "\n".join(lines)
    lines.append(f"Result: {record.result.value}" + (f" ({record.error})" if record.error else ""))
    if record.output:
        lines += ["", "Agent summary:", "", "> " + record.output[-1500:].replace("\n", "\n> ")]
    if record.completion is not None:
        lines += ["", f"Completion claimed ({record.completion.kind})."]
        for c in record.completion.acceptance_criteria_met:
            lines.append(f"- [{'x' if c.met else ' '}] {c.criterion}: {c.evidence}")
    if record.feedback_results:
        lines += ["", "Feedback loops:"]
        for name, result in record.feedback_results.items():
            state = "skipped" if result.skipped else ("passed" if result.passed else "FAILED")
            lines.append(f"- {name}: {state}")
    if record.files_changed:
        lines += ["", "Files changed: " + ", ".join(record.files_changed[:30])]
    if record.commit_hash:
        lines.append(f"Commit: {record.commit_hash[:12]}")
    lines += [
        "",
        "Approve to continue; answer with a note to steer the next iteration; reject to pause.",
    ]
    return "\n".join(lines)


class InboxApprovals:
    """The battle engine's approval hook, backed by the inbox."""

    async def opened(self, orch: BattleControl, active: ActiveBattle, iteration: int) -> None:
        inbox = orch.inbox

        async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
            if orch.battle_of(active.task_id) is active and active.approval_delivery == delivery.id:
                await orch.approve(
                    active.task_id, bool(feedback.values.get("value")), feedback.note
                )

        delivery = await inbox.create(
            f"Approve iteration {iteration} of {active.task_id}?",
            _approval_body(active, iteration),
            "blocking",
            {
                "type": "confirm",
                "prompt": "Continue the battle?",
                "confirmLabel": "Approve",
                "cancelLabel": "Reject",
            },
            Source(kind="battle_approval", task_id=active.task_id, iteration=iteration),
            on_answer=on_answer,
        )
        active.approval_delivery = delivery.id
        orch.publish(
            ev.AwaitApprovalDelivery(
                task_id=active.task_id, iteration=iteration, delivery_id=delivery.id
            )
        )

    async def closed(
        self, orch: BattleControl, active: ActiveBattle, iteration: int, answer: Approve | None
    ) -> None:
        inbox = orch.inbox
        delivery_id, active.approval_delivery = active.approval_delivery, None
        if delivery_id is None:
            return
        if answer is None:
            await inbox.close(delivery_id, "the battle was paused")
        else:
            await inbox.record_outside_answer(delivery_id, {"value": answer.approved}, answer.note)


async def offer_retry(orch: BattleControl, active: ActiveBattle) -> None:
    """Failure hook: after max iterations, offer a retry with more iterations, or stop."""
    inbox = orch.inbox
    error = active.battle.error or ""
    if not error.startswith("max iterations"):
        return
    more = (active.battle.max_iterations or 0) + RETRY_MORE
    retry = f"retry with {more} iterations"

    async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
        if feedback.values.get("value") == retry:
            try:
                await orch.start(active.task_id, active.battle.mode.value, min(more, 100))
            except PokeralphError as exc:
                orch.publish(
                    ev.Notice(task_id=active.task_id, message=f"retry not started: {exc.message}")
                )

    await inbox.create(
        f"{active.task_id} failed after {len(active.battle.iterations)} iterations",
        f"**{active.task_id}: {active.title}** ran out of iterations without completing.\n\n"
        f"Last error: {error}\n\nRetry with more iterations, or stop here.",
        "interactive",
        {"type": "select", "prompt": "What next?", "options": [retry, "stop"]},
        Source(kind="battle_failed", task_id=active.task_id),
        on_answer=on_answer,
    )


ACTIONS: dict[str, EscalationAction] = {
    "retry": "retry",
    "accept": "accept",
    "cancel": "cancel",
}
REASONS = {
    "verification_cycles": "its verification cycles ran out",
    "review_cycles": "its review cycles ran out",
    "transient_failures": "its retries of a transient failure ran out",
    "merge_conflict": "its branch cannot be merged back",
}


def _escalation_body(active: ActiveBattle, escalation: Escalation) -> str:
    battle = active.battle
    lines = [
        f"**{active.task_id}: {active.title}** needs a decision: {REASONS[escalation.reason]}.",
        "",
        escalation.message,
        "",
        f"Phase: {escalation.phase}; implementation iterations: {len(battle.iterations)}; "
        f"verifications: {battle.verification.count}; reviews: {battle.review.count}; "
        f"cost so far: ${battle.cost_usd:.4f}.",
    ]
    findings = battle.findings
    cycles = battle.verification if escalation.phase == "verification" else battle.review
    last = cycles.reports[-1] if cycles.reports else None
    if last is not None:
        lines += ["", f"Last {escalation.phase} report (cycle {last.cycle}): {last.outcome}"]
        if last.problem:
            lines.append(f"> {last.problem}")
        elif last.summary:
            lines.append("> " + last.summary.replace("\n", "\n> "))
    if findings is not None and findings.items:
        lines += ["", "What it asked for:"]
        for item in findings.items[:10]:
            where = f" ({item.file}:{item.line})" if item.file and item.line else ""
            lines.append(f"- [{item.severity}]{where} {item.description[:300]}")
    if escalation.reason == "merge_conflict":
        worktree = battle.worktree
        branch = worktree.branch if worktree else "its branch"
        lines += [
            "",
            f"Nothing is lost: the battle's commits stay on {branch}"
            + (f" (worktree {worktree.path})" if worktree else "")
            + ", and your working tree was not touched.",
            "",
            "- **retry**: merge again (after you resolved it: committed or stashed your "
            f"changes, or rebased {branch} yourself).",
            f"- **accept**: the battle completes without merging; {branch} stays for you "
            "to merge by hand.",
            f"- **cancel**: the battle is cancelled; its worktree and {branch} are deleted.",
        ]
        return "\n".join(lines)
    lines += [
        "",
        "- **retry**: the battle goes on with new cycles; your guidance goes into every "
        "later implementation prompt.",
        "- **accept**: the work is accepted as it is; the battle completes.",
        "- **cancel**: the battle is cancelled.",
    ]
    return "\n".join(lines)


class InboxEscalations:
    """The battle engine's escalation hook, backed by the inbox."""

    def _listener(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> AnswerHandler:
        task_id: str | None = active.task_id

        async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
            values = feedback.values.get("values") or {}
            action = ACTIONS.get(str(values.get("action")))
            if action is None or task_id is None:
                return
            guidance = values.get("guidance") or feedback.note
            await orch.resolve_escalation(task_id, escalation.number, action, guidance, delivery.id)

        return on_answer

    async def opened(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None:
        inbox = orch.inbox
        delivery = await inbox.create(
            f"{active.task_id} is escalated: {REASONS[escalation.reason]}"[:200],
            _escalation_body(active, escalation),
            "blocking",
            {
                "type": "form",
                "prompt": "How should the battle go on?",
                "fields": [
                    {
                        "name": "action",
                        "type": "select",
                        "label": "Decision",
                        "options": list(ACTIONS),
                        "required": True,
                    },
                    {
                        "name": "guidance",
                        "type": "textarea",
                        "label": "Guidance for the implementer (with retry)",
                        "placeholder": "what to do differently",
                    },
                ],
            },
            Source(kind="battle_escalation", task_id=active.task_id),
            on_answer=self._listener(orch, active, escalation),
        )
        escalation.delivery_id = delivery.id
        await orch.save(active, progress=False)

    async def reopened(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None:
        inbox = orch.inbox
        if escalation.delivery_id is None:
            return
        listener = self._listener(orch, active, escalation)
        try:
            delivery, answer = await inbox.answer_of(escalation.delivery_id)
        except PokeralphError:
            return  # the item is gone: the battle waits; `battle cancel` still ends it
        if delivery.status == "completed" and answer is not None:
            # answered while no daemon listened: act on it now
            await listener(delivery, answer)
        elif delivery.status != "completed":
            inbox.on_answer(escalation.delivery_id, listener)

    async def answered(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation
    ) -> None:
        """Answered with ``battle.resolve``: the inbox item keeps the same answer."""
        inbox, resolution = orch.inbox, escalation.resolution
        if escalation.delivery_id is None or resolution is None:
            return
        values: dict[str, Any] = {"action": resolution.action}
        if resolution.guidance:
            values["guidance"] = resolution.guidance
        await inbox.record_outside_answer(escalation.delivery_id, {"values": values}, None)

    async def closed(
        self, orch: BattleControl, active: ActiveBattle, escalation: Escalation, reason: str
    ) -> None:
        inbox = orch.inbox
        if escalation.delivery_id is None:
            return
        with contextlib.suppress(PokeralphError):
            await inbox.close(escalation.delivery_id, reason)
