"""``battle.*``: start, pause, resume, cancel, approve, inspect and revert battles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import (
    BattleApproveParams,
    BattleControlParams,
    BattleLogParams,
    BattlePauseParams,
    BattleStartParams,
    RepoParams,
    TaskRef,
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
    )
    async def start(ctx: CallContext, p: BattleStartParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).start(p.task_id, p.mode, p.max_iterations)

    @table.add(
        "battle.pause",
        BattlePauseParams,
        "Pause at the end of the running iteration, or at once with now (the agent is stopped).",
    )
    async def pause(ctx: CallContext, p: BattlePauseParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).pause(p.task_id, p.now)

    @table.add(
        "battle.resume", BattleControlParams, "Resume a paused battle at the next iteration."
    )
    async def resume(ctx: CallContext, p: BattleControlParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).resume(p.task_id)

    @table.add(
        "battle.cancel",
        BattleControlParams,
        "Cancel the battle: the agent's whole process tree is ended; nothing runs after it.",
    )
    async def cancel(ctx: CallContext, p: BattleControlParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).cancel(p.task_id)

    @table.add(
        "battle.approve",
        BattleApproveParams,
        "Approve (or reject, approve=false) the iteration awaiting approval; a note goes "
        "into the next iteration's prompt; rejection pauses the battle.",
    )
    async def approve(ctx: CallContext, p: BattleApproveParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).approve(p.task_id, p.approve, p.note)

    @table.add(
        "battle.current",
        RepoParams,
        "Active battles: of one repository when repo is given, else of every repository.",
    )
    async def current(ctx: CallContext, p: RepoParams) -> dict[str, Any]:
        out = [
            {"repo": repo.name, **summary}
            for repo in ctx.repos.scope(p.repo)
            if (summary := repo.battles.summary())
        ]
        return {"battles": out, "engine": ctx.services.battles.summary()}

    @table.add("battle.progress", TaskRef, "The task's progress.json (live while it runs).")
    async def progress(ctx: CallContext, p: TaskRef) -> dict[str, Any]:
        return await _orch(ctx, p.repo).progress(p.task_id)

    @table.add("battle.history", TaskRef, "The task's battle with every iteration.")
    async def history(ctx: CallContext, p: TaskRef) -> dict[str, Any]:
        return await _orch(ctx, p.repo).history(p.task_id)

    @table.add(
        "battle.log",
        BattleLogParams,
        "One iteration's log (default: the latest): bytes from offset (negative: from the "
        "end), or the last `tail` lines; at most `limit` bytes.",
    )
    async def log_(ctx: CallContext, p: BattleLogParams) -> dict[str, Any]:
        return await _orch(ctx, p.repo).log(p.task_id, p.iteration, p.offset, p.tail, p.limit)

    @table.add(
        "battle.revert",
        TaskRef,
        "Undo the task's last PokéRalph commit with a revert commit (refused if HEAD is not one).",
    )
    async def revert(ctx: CallContext, p: TaskRef) -> dict[str, Any]:
        return await _orch(ctx, p.repo).revert(p.task_id)
