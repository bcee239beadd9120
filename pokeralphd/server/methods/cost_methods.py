"""``cost.summary``: what the agents cost, from the daemon-wide ledger (totals by one key,
and with ``split`` each group's parts by a second: spend per day and repository, say)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from msgspec import UNSET

from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import CostSummaryParams
from pokeralphd.protocol.results import CostGroup, CostPart, CostSummaryResult

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable
    from pokeralphd.store.ledger import Totals


def register(table: MethodTable) -> None:
    @table.add(
        "cost.summary",
        CostSummaryParams,
        "Cost and tokens of every agent run (iterations and the verifier's and reviewer's "
        "runs), grouped by day, repository, task, backend, model or phase (days in UTC; "
        "since/until inclusive; one repository when repo is given); with split, each "
        "group's parts by a second key (by day, split by repo: each day's repositories).",
        result=CostSummaryResult,
    )
    async def summary(ctx: CallContext, p: CostSummaryParams) -> CostSummaryResult:
        if p.since and p.until and p.since > p.until:
            raise InvalidParams("since must not be after until", field="since")
        if p.split is not None and p.split == p.by:
            raise InvalidParams("split must differ from by", field="split")
        repo = ctx.repos.resolve(p.repo, usable=False).name if p.repo else None
        ledger = ctx.services.ledger
        groups, total = await anyio.to_thread.run_sync(
            lambda: ledger.summary(p.by, since=p.since, until=p.until, repo=repo)
        )
        out = [_group(key, t) for key, t in groups.items()]
        if p.split is not None:
            split = p.split
            parts = await anyio.to_thread.run_sync(
                lambda: ledger.breakdown(p.by, split, since=p.since, until=p.until, repo=repo)
            )
            for group in out:
                group.parts = [_part(key, t) for key, t in parts.get(group.key, {}).items()]
        return CostSummaryResult(
            by=p.by,
            split=UNSET if p.split is None else p.split,
            groups=out,
            total=total.spend(),
            skipped=ledger.skipped,
        )


def _group(key: str, totals: Totals) -> CostGroup:
    spent = totals.spend()
    return CostGroup(
        key=key, cost_usd=spent.cost_usd, iterations=spent.iterations, tokens=spent.tokens
    )


def _part(key: str, totals: Totals) -> CostPart:
    spent = totals.spend()
    return CostPart(
        key=key, cost_usd=spent.cost_usd, iterations=spent.iterations, tokens=spent.tokens
    )
