"""``planning.*``: turn an idea (or an existing PRD's description) into a PRD with tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.protocol.params import (
    PlanningAnswerParams,
    PlanningFinishParams,
    PlanningStartParams,
    RepoParams,
)
from pokeralphd.protocol.results import FinishResult, PlanningStatus

if TYPE_CHECKING:
    from pokeralphd.planning.service import RepoPlanner
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def _planner(ctx: CallContext, repo: str | None) -> RepoPlanner:
    return ctx.repos.resolve(repo).planner


def register(table: MethodTable) -> None:
    @table.add(
        "planning.start",
        PlanningStartParams,
        "Start planning from an idea (or, with breakdown, from the PRD's description); the "
        "agent runs in plan mode and may ask questions.",
        result=PlanningStatus,
    )
    async def start(ctx: CallContext, p: PlanningStartParams) -> PlanningStatus:
        started = await _planner(ctx, p.repo).start(p.idea, p.breakdown)
        return started

    @table.add(
        "planning.status",
        RepoParams,
        "State, questions waiting, the PRD draft and its problems.",
        result=PlanningStatus,
    )
    async def status(ctx: CallContext, p: RepoParams) -> PlanningStatus:
        return _planner(ctx, p.repo).status()

    @table.add(
        "planning.answer",
        PlanningAnswerParams,
        "Answer the agent's questions; the same agent session continues.",
        result=PlanningStatus,
    )
    async def answer(ctx: CallContext, p: PlanningAnswerParams) -> PlanningStatus:
        return await _planner(ctx, p.repo).answer(p.answer)

    @table.add(
        "planning.finish",
        PlanningFinishParams,
        "Validate the PRD draft (reasons if invalid); with save, write it, replacing or "
        "merging with the existing PRD.",
        result=FinishResult,
    )
    async def finish(ctx: CallContext, p: PlanningFinishParams) -> FinishResult:
        repo = ctx.repos.resolve(p.repo)
        if p.save and p.merge == "replace":
            repo.battles.ensure_idle()  # a new PRD would pull the task from under a battle
        return await repo.planner.finish(p.save, p.merge)

    @table.add(
        "planning.reset",
        RepoParams,
        "Stop and forget the planning session.",
        result=PlanningStatus,
    )
    async def reset(ctx: CallContext, p: RepoParams) -> PlanningStatus:
        return await _planner(ctx, p.repo).reset()
