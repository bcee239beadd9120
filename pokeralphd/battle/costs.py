"""What each agent run of a battle cost: told to the cost hooks (the daemon-wide ledger)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from pokeralphd.protocol import events as ev
from pokeralphd.store.ledger import Ledger, LedgerEntry

if TYPE_CHECKING:
    from pokeralphd.battle.state import ActiveBattle, BattleControl, Charge

log = logging.getLogger(__name__)


async def charge(orch: BattleControl, active: ActiveBattle, cost: Charge) -> None:
    """Tell every cost hook; one that fails (a full disk) is logged and said, never the
    battle's failure."""
    for hook in orch.host.cost_hooks:
        try:
            await hook(orch, active, cost)
        except Exception as exc:
            log.exception("a cost hook failed")
            orch.publish(
                ev.Notice(
                    task_id=active.task_id,
                    message=f"the cost of {cost.phase} {cost.iteration} was not recorded: {exc}",
                )
            )


class LedgerRecorder:
    """Appends every agent run whose cost or tokens are known to the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def __call__(self, orch: BattleControl, active: ActiveBattle, charge: Charge) -> None:
        cost = charge
        if cost.cost_usd is None and cost.usage is None:
            return  # the agent never ran (cancelled before it started, refused at start)
        usage = cost.usage
        entry = LedgerEntry(
            at=cost.at,
            repo=orch.repo.name,
            task_id=active.task_id,
            attempt=active.battle.attempt,
            iteration=cost.iteration,
            backend=cost.backend,
            model=cost.model,
            cost_usd=cost.cost_usd or 0.0,
            phase=cost.phase,
            tokens={}
            if usage is None
            else {
                "inputTokens": usage.input_tokens,
                "outputTokens": usage.output_tokens,
                "cacheCreationInputTokens": usage.cache_creation_input_tokens,
                "cacheReadInputTokens": usage.cache_read_input_tokens,
                "reasoningOutputTokens": usage.reasoning_output_tokens,
            },
        )
        await anyio.to_thread.run_sync(self.ledger.append, entry)
