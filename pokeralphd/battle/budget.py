"""Spending caps: a battle that would pass one pauses before its next agent run.

Three caps (config ``budget``): ``perBattleUsd`` (what this battle spent, all its runs),
``perRepoPerDayUsd`` (what this repository spent today, UTC, from the daemon-wide
ledger) and ``perDayUsd`` (every repository today). "Would pass" means: what was spent
plus what this battle's last agent run cost goes over the cap (the next run is assumed
to cost as much as the last one). The battle then pauses with the reason, a
``budget_exceeded`` event says which cap, and an inbox item offers to raise that cap
(to twice the spend) and go on, or to stop the battle.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pokeralphd.domain.inbox import Source
from pokeralphd.errors import PokeralphError
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from pokeralph_core.config.model import Config
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.inbox import Delivery, Feedback

log = logging.getLogger(__name__)
CapKey = Literal["perBattleUsd", "perRepoPerDayUsd", "perDayUsd"]
CAP_KEYS: dict[CapKey, str] = {
    "perBattleUsd": "per_battle_usd",
    "perRepoPerDayUsd": "per_repo_per_day_usd",
    "perDayUsd": "per_day_usd",
}
WHAT = {
    "perBattleUsd": "this battle",
    "perRepoPerDayUsd": "this repository today",
    "perDayUsd": "every repository today",
}


@dataclass(frozen=True, slots=True)
class Overrun:
    cap: CapKey
    limit_usd: float
    spent_usd: float
    next_usd: float  # what the next run is expected to cost

    @property
    def reason(self) -> str:
        return (
            f"budget: {WHAT[self.cap]} spent ${self.spent_usd:.2f} of the "
            f"budget.{self.cap} ${self.limit_usd:.2f}, and the next run would pass it "
            f"(about ${self.next_usd:.2f})"
        )


def last_run_cost(active: ActiveBattle) -> float:
    """What this battle's last agent run cost: the estimate of the next one."""
    costs = [i.cost_usd for i in active.battle.iterations if i.cost_usd]
    return costs[-1] if costs else 0.0


def overrun(orch: BattleControl, active: ActiveBattle, config: Config) -> Overrun | None:
    """The first cap the next run would pass, if any."""
    caps = config.budget
    if (
        caps.per_battle_usd is None
        and caps.per_repo_per_day_usd is None
        and caps.per_day_usd is None
    ):
        return None
    estimate = last_run_cost(active)
    spent = {
        "perBattleUsd": lambda: active.battle.cost_usd,
        "perRepoPerDayUsd": lambda: orch.host.spent_today(orch.repo.name),
        "perDayUsd": lambda: orch.host.spent_today(None),
    }
    for cap, field in CAP_KEYS.items():
        limit = getattr(caps, field)
        if limit is None:
            continue
        so_far = spent[cap]()
        if so_far >= limit or so_far + estimate > limit:
            return Overrun(cap, limit, so_far, estimate)
    return None


async def offer_more(orch: BattleControl, active: ActiveBattle, over: Overrun) -> None:
    """Say it (event, inbox item): raise the cap to twice the spend and go on, or stop."""
    orch.publish(
        ev.BudgetExceeded(
            task_id=active.task_id,
            cap=over.cap,
            limit_usd=over.limit_usd,
            spent_usd=round(over.spent_usd, 6),
            next_usd=round(over.next_usd, 6),
            reason=over.reason,
        )
    )
    inbox = orch.inbox
    if active.budget_delivery is not None:  # asked before and not answered: ask anew
        with contextlib.suppress(PokeralphError):
            await inbox.close(active.budget_delivery, "asked again")
        active.budget_delivery = None
    raised = round(max(over.limit_usd, over.spent_usd + over.next_usd) * 2, 2)
    go_on = f"raise budget.{over.cap} to ${raised:.2f} and go on"
    task_id = active.task_id

    async def on_answer(_delivery: Delivery, feedback: Feedback) -> None:
        active.budget_delivery = None
        try:
            if feedback.values.get("value") == go_on:
                await orch.repo.config_set_in_effect(f"budget.{over.cap}", raised)
                await orch.resume(task_id)
            else:
                await orch.cancel(task_id)
        except PokeralphError as exc:
            orch.publish(
                ev.Notice(task_id=task_id, message=f"budget answer not applied: {exc.message}")
            )

    delivery = await inbox.create(
        f"{task_id} paused: budget",
        f"**{task_id}: {active.title}** paused before its next agent run.\n\n{over.reason}.\n\n"
        f"Raise the cap and go on (in this repository's config where it sets the cap and "
        f"is trusted, else in your own), or stop the battle.",
        "blocking",
        {"type": "select", "prompt": "What next?", "options": [go_on, "stop the battle"]},
        Source(kind="battle_budget", task_id=task_id),
        on_answer=on_answer,
    )
    active.budget_delivery = delivery.id
