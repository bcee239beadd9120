"""``battle.*``: start, pause, resume, cancel, approve, inspect and revert battles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import (
    BattleApproveParams,
    BattleControlParams,
    BattleDiffParams,
    BattleLogParams,
    BattlePauseParams,
    BattleReportParams,
    BattleResolveParams,
    BattleStartParams,
    RepoParams,
    TaskRef,
)
from pokeralphd.protocol.results import (
    BattleApproveResult,
    BattleCurrentResult,
    BattlePauseResult,
    BattleResolveResult,
    BattleResult,
    BattleStartResult,
    DiffResult,
    HistoryResult,
    LogResult,
    ProgressResult,
    ReportResult,
    RevertResult,
)

if TYPE_CHECKING:
    from pokeralphd.battle.orchestrator import BattleOrchestrator
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def _orch(ctx: CallContext, repo: str | None) -> BattleOrchestrator:
    return ctx.repos.resolve(repo).battles


def register(table: MethodTable) -> None:
    @table.add(
        "battle.start",
        BattleStartParams,
        "Start a battle for a task (mode and maxIterations override the config); with all "
        "(and no taskId), every pending task whose dependsOn are completed, in priority "
        "order, up to parallelBattles, the rest as battles end. Up to parallelBattles per "
        "repository (above 1 each in its own git worktree); beyond the daemon-wide limit "
        "a battle waits as queued.",
        result=BattleStartResult,
    )
    async def start(ctx: CallContext, p: BattleStartParams) -> BattleStartResult:
        orch = _orch(ctx, p.repo)
        if p.all:
            if p.task_id is not None:
                raise InvalidParams("give taskId or all, not both", field="all")
            started = await orch.schedule.start_all(p.mode, p.max_iterations)
        elif p.task_id is None:
            raise InvalidParams("taskId is required (or all: true)", field="taskId")
        else:
            started = await orch.start(p.task_id, p.mode, p.max_iterations)
        return started

    @table.add(
        "battle.pause",
        BattlePauseParams,
        "Pause at the end of the running iteration, or at once with now (the agent is stopped).",
        result=BattlePauseResult,
    )
    async def pause(ctx: CallContext, p: BattlePauseParams) -> BattlePauseResult:
        paused = await _orch(ctx, p.repo).pause(p.task_id, p.now)
        return paused

    @table.add(
        "battle.resume",
        BattleControlParams,
        "Resume a paused battle at the next iteration (a blocked one retries at once).",
        result=BattleResult,
    )
    async def resume(ctx: CallContext, p: BattleControlParams) -> BattleResult:
        return await _orch(ctx, p.repo).resume(p.task_id)

    @table.add(
        "battle.cancel",
        BattleControlParams,
        "Cancel the battle: the agent's whole process tree is ended; nothing runs after it.",
        result=BattleResult,
    )
    async def cancel(ctx: CallContext, p: BattleControlParams) -> BattleResult:
        return await _orch(ctx, p.repo).cancel(p.task_id)

    @table.add(
        "battle.approve",
        BattleApproveParams,
        "Approve (or reject, approve=false) the iteration awaiting approval; a note goes "
        "into the next iteration's prompt; rejection pauses the battle.",
        result=BattleApproveResult,
    )
    async def approve(ctx: CallContext, p: BattleApproveParams) -> BattleApproveResult:
        approved = await _orch(ctx, p.repo).approve(p.task_id, p.approve, p.note)
        return approved

    @table.add(
        "battle.resolve",
        BattleResolveParams,
        "Answer the open escalation (retry with guidance, accept the work as it is, or "
        "cancel), as its inbox item would; answered once only.",
        result=BattleResolveResult,
    )
    async def resolve(ctx: CallContext, p: BattleResolveParams) -> BattleResolveResult:
        out = await _orch(ctx, p.repo).resolve_escalation(p.task_id, None, p.action, p.guidance)
        return BattleResolveResult(battle=out.battle)

    @table.add(
        "battle.current",
        RepoParams,
        "Active battles: of one repository when repo is given, else of every repository.",
        result=BattleCurrentResult,
    )
    async def current(ctx: CallContext, p: RepoParams) -> BattleCurrentResult:
        out = [summary for repo in ctx.repos.scope(p.repo) for summary in repo.battles.summaries()]
        return BattleCurrentResult(battles=out, engine=ctx.services.battles.summary())

    @table.add(
        "battle.progress",
        TaskRef,
        "The task's progress.json (live while it runs).",
        result=ProgressResult,
    )
    async def progress(ctx: CallContext, p: TaskRef) -> ProgressResult:
        return await _orch(ctx, p.repo).queries.progress(p.task_id)

    @table.add(
        "battle.history", TaskRef, "The task's battle with every iteration.", result=HistoryResult
    )
    async def history(ctx: CallContext, p: TaskRef) -> HistoryResult:
        return await _orch(ctx, p.repo).queries.history(p.task_id)

    @table.add(
        "battle.report",
        BattleReportParams,
        "A verification or review report of the task's battle (seed 003): cycle N, or the latest.",
        result=ReportResult,
    )
    async def report(ctx: CallContext, p: BattleReportParams) -> ReportResult:
        found = await _orch(ctx, p.repo).queries.report(p.task_id, p.phase, p.cycle)
        return found

    @table.add(
        "battle.log",
        BattleLogParams,
        "One iteration's log (default: the latest): bytes from offset (negative: from the "
        "end), or the last `tail` lines; at most `limit` bytes.",
        result=LogResult,
    )
    async def log_(ctx: CallContext, p: BattleLogParams) -> LogResult:
        read = await _orch(ctx, p.repo).queries.log(
            p.task_id, p.iteration, p.offset, p.tail, p.limit
        )
        return read

    @table.add(
        "battle.diff",
        BattleDiffParams,
        "The commit an iteration made (default: the latest), as `git show` gives it: stat "
        "and patch, at most `limit` bytes (`truncated` says when cut).",
        result=DiffResult,
    )
    async def diff(ctx: CallContext, p: BattleDiffParams) -> DiffResult:
        read = await _orch(ctx, p.repo).queries.diff(p.task_id, p.iteration, p.limit)
        return read

    @table.add(
        "battle.revert",
        TaskRef,
        "Undo the task's last PokéRalph commit with a revert commit (refused if HEAD is not one).",
        result=RevertResult,
    )
    async def revert(ctx: CallContext, p: TaskRef) -> RevertResult:
        return await _orch(ctx, p.repo).revert(p.task_id)
