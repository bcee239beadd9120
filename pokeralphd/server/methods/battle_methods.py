"""``battle.*``: start, pause, resume, cancel, approve, inspect and revert battles."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from pokeralphd.protocol.params import (
    BattleApproveParams,
    BattleControlParams,
    BattleDiffParams,
    BattleLogParams,
    BattlePauseParams,
    BattleStartParams,
    RepoParams,
    TaskRef,
)
from pokeralphd.protocol.results import (
    BattleApproveResult,
    BattleCurrentResult,
    BattlePauseResult,
    BattleResult,
    BattleStartResult,
    DiffResult,
    EngineSummary,
    HistoryResult,
    LogResult,
    ProgressResult,
    RepoBattle,
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
        "Start a battle for a task (mode and maxIterations override the config). One per "
        "repository; beyond the daemon-wide limit it waits as queued.",
        result=BattleStartResult,
    )
    async def start(ctx: CallContext, p: BattleStartParams) -> BattleStartResult:
        started = await _orch(ctx, p.repo).start(p.task_id, p.mode, p.max_iterations)
        return msgspec.convert(started, BattleStartResult)

    @table.add(
        "battle.pause",
        BattlePauseParams,
        "Pause at the end of the running iteration, or at once with now (the agent is stopped).",
        result=BattlePauseResult,
    )
    async def pause(ctx: CallContext, p: BattlePauseParams) -> BattlePauseResult:
        paused = await _orch(ctx, p.repo).pause(p.task_id, p.now)
        return msgspec.convert(paused, BattlePauseResult)

    @table.add(
        "battle.resume",
        BattleControlParams,
        "Resume a paused battle at the next iteration.",
        result=BattleResult,
    )
    async def resume(ctx: CallContext, p: BattleControlParams) -> BattleResult:
        return msgspec.convert(await _orch(ctx, p.repo).resume(p.task_id), BattleResult)

    @table.add(
        "battle.cancel",
        BattleControlParams,
        "Cancel the battle: the agent's whole process tree is ended; nothing runs after it.",
        result=BattleResult,
    )
    async def cancel(ctx: CallContext, p: BattleControlParams) -> BattleResult:
        return msgspec.convert(await _orch(ctx, p.repo).cancel(p.task_id), BattleResult)

    @table.add(
        "battle.approve",
        BattleApproveParams,
        "Approve (or reject, approve=false) the iteration awaiting approval; a note goes "
        "into the next iteration's prompt; rejection pauses the battle.",
        result=BattleApproveResult,
    )
    async def approve(ctx: CallContext, p: BattleApproveParams) -> BattleApproveResult:
        approved = await _orch(ctx, p.repo).approve(p.task_id, p.approve, p.note)
        return msgspec.convert(approved, BattleApproveResult)

    @table.add(
        "battle.current",
        RepoParams,
        "Active battles: of one repository when repo is given, else of every repository.",
        result=BattleCurrentResult,
    )
    async def current(ctx: CallContext, p: RepoParams) -> BattleCurrentResult:
        out = [
            msgspec.convert({"repo": repo.name, **summary}, RepoBattle)
            for repo in ctx.repos.scope(p.repo)
            if (summary := repo.battles.summary())
        ]
        engine = msgspec.convert(ctx.services.battles.summary(), EngineSummary)
        return BattleCurrentResult(battles=out, engine=engine)

    @table.add(
        "battle.progress",
        TaskRef,
        "The task's progress.json (live while it runs).",
        result=ProgressResult,
    )
    async def progress(ctx: CallContext, p: TaskRef) -> ProgressResult:
        return msgspec.convert(await _orch(ctx, p.repo).progress(p.task_id), ProgressResult)

    @table.add(
        "battle.history", TaskRef, "The task's battle with every iteration.", result=HistoryResult
    )
    async def history(ctx: CallContext, p: TaskRef) -> HistoryResult:
        return msgspec.convert(await _orch(ctx, p.repo).history(p.task_id), HistoryResult)

    @table.add(
        "battle.log",
        BattleLogParams,
        "One iteration's log (default: the latest): bytes from offset (negative: from the "
        "end), or the last `tail` lines; at most `limit` bytes.",
        result=LogResult,
    )
    async def log_(ctx: CallContext, p: BattleLogParams) -> LogResult:
        read = await _orch(ctx, p.repo).log(p.task_id, p.iteration, p.offset, p.tail, p.limit)
        return msgspec.convert(read, LogResult)

    @table.add(
        "battle.diff",
        BattleDiffParams,
        "The commit an iteration made (default: the latest), as `git show` gives it: stat "
        "and patch, at most `limit` bytes (`truncated` says when cut).",
        result=DiffResult,
    )
    async def diff(ctx: CallContext, p: BattleDiffParams) -> DiffResult:
        read = await _orch(ctx, p.repo).diff(p.task_id, p.iteration, p.limit)
        return msgspec.convert(read, DiffResult)

    @table.add(
        "battle.revert",
        TaskRef,
        "Undo the task's last PokéRalph commit with a revert commit (refused if HEAD is not one).",
        result=RevertResult,
    )
    async def revert(ctx: CallContext, p: TaskRef) -> RevertResult:
        return msgspec.convert(await _orch(ctx, p.repo).revert(p.task_id), RevertResult)
