"""What each iteration cost, into the daemon-wide ledger (an iteration hook)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from pokeralphd.store.ledger import Ledger, LedgerEntry

if TYPE_CHECKING:
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import Config, Iteration


class LedgerRecorder:
    """Appends every iteration that ran an agent (cost or tokens known) to the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def __call__(
        self, orch: BattleControl, active: ActiveBattle, record: Iteration, config: Config
    ) -> None:
        if record.cost_usd is None and record.usage is None:
            return  # the agent never ran (cancelled before it started, refused at start)
        usage = record.usage
        entry = LedgerEntry(
            at=record.ended_at or record.started_at,
            repo=orch.repo.name,
            task_id=active.task_id,
            attempt=active.battle.attempt,
            iteration=record.number,
            backend=config.agent.backend,
            model=config.agent.model,
            cost_usd=record.cost_usd or 0.0,
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
