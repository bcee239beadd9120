"""Where battles need a person, through the inbox.

- Each HITL approval is a blocking ``confirm`` delivery; answering it approves or rejects
  the iteration (a note goes into the next prompt; a rejection pauses the battle), and a
  ``battle.approve`` from elsewhere settles the delivery with the same answer.
- A battle that fails at max iterations leaves an interactive ``select`` delivery offering
  a retry with more iterations, or stop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.domain.inbox import Delivery, Feedback, Source
from pokeralphd.errors import PokeralphError

if TYPE_CHECKING:
    from pokeralphd.battle.state import ActiveBattle, BattleControl

RETRY_MORE = 5


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
        if inbox is None:
            return

        async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
            if orch.active is active and active.approval_delivery == delivery.id:
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
            "await_approval_delivery",
            {"iteration": iteration, "deliveryId": delivery.id},
            active.task_id,
        )

    async def closed(self, orch: BattleControl, active: ActiveBattle, iteration: int) -> None:
        inbox = orch.inbox
        delivery_id, active.approval_delivery = active.approval_delivery, None
        if inbox is None or delivery_id is None:
            return
        if active.pause_requested and active.approved:
            await inbox.close(delivery_id, "the battle was paused")
        else:
            await inbox.record_outside_answer(
                delivery_id, {"value": active.approved}, active.approval_note
            )


async def offer_retry(orch: BattleControl, active: ActiveBattle) -> None:
    """Failure hook: after max iterations, offer a retry with more iterations, or stop."""
    inbox = orch.inbox
    error = active.battle.error or ""
    if inbox is None or not error.startswith("max iterations"):
        return
    more = (active.battle.max_iterations or 0) + RETRY_MORE
    retry = f"retry with {more} iterations"

    async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
        if feedback.values.get("value") == retry:
            try:
                await orch.start(active.task_id, active.battle.mode.value, min(more, 100))
            except PokeralphError as exc:
                orch.publish(
                    "notice", {"message": f"retry not started: {exc.message}"}, active.task_id
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
