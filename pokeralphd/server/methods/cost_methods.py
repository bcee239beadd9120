"""``cost.summary``: what the agents cost, from the daemon-wide ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import CostSummaryParams
from pokeralphd.protocol.results import CostGroup, CostSummaryResult, SpendTotals

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable
    from pokeralphd.store.ledger import Totals


def spend(totals: Totals) -> SpendTotals:
    data = totals.to_json()
    return SpendTotals(
        cost_usd=data["costUsd"], iterations=data["iterations"], tokens=data["tokens"]
    )


def register(table: MethodTable) -> None:
    @table.add(
        "cost.summary",
        CostSummaryParams,
        "Cost and tokens of every agent run (iterations and the verifier's and reviewer's "
        "runs), grouped by day, repository, task, backend, model or phase (days in UTC; "
        "since/until inclusive; one repository when repo is given).",
        result=CostSummaryResult,
    )
    async def summary(ctx: CallContext, p: CostSummaryParams) -> CostSummaryResult:
        if p.since and p.until and p.since > p.until:
            raise InvalidParams("since must not be after until", field="since")
        repo = ctx.repos.resolve(p.repo, usable=False).name if p.repo else None
        ledger = ctx.services.ledger
        groups, total = await anyio.to_thread.run_sync(
            lambda: ledger.summary(p.by, since=p.since, until=p.until, repo=repo)
        )
        return CostSummaryResult(
            by=p.by,
            groups=[_group(key, t) for key, t in groups.items()],
            total=spend(total),
            skipped=ledger.skipped,
        )


def _group(key: str, totals: Totals) -> CostGroup:
    data = totals.to_json()
    return CostGroup(
        key=key, cost_usd=data["costUsd"], iterations=data["iterations"], tokens=data["tokens"]
    )
