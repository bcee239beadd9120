"""After a restart: the battles a previous daemon left active, settled and owned again.

A battle that was running, queued, blocked or awaiting approval is left paused (its
interrupted iteration recorded as cancelled, its agent's recorded process ended) and
resumable; an escalated one stays escalated, its inbox item listened to again, and an
answer recorded but not acted on is acted on now. A battle that ended mid-cleanup has
its worktree removed; worktrees no battle owns are swept.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pokeralph_core.timeutil import utcnow
from pokeralphd.battle import worktrees
from pokeralphd.battle.phases import open_escalation, pending_resolution
from pokeralphd.battle.state import ActiveBattle
from pokeralphd.domain.models import Iteration, Progress
from pokeralphd.domain.statuses import (
    TERMINAL_BATTLE_STATUSES,
    BattleStatus,
    IterationResult,
    ProgressStatus,
    battle_path,
    check_battle_transition,
)
from pokeralphd.errors import PokeralphError
from pokeralphd.proc import end_recorded
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from pokeralphd.battle.orchestrator import BattleOrchestrator

log = logging.getLogger(__name__)
B = BattleStatus


async def recover(orch: BattleOrchestrator) -> None:
    """Settle the battles of ``orch``'s repository that the previous daemon left active."""
    repo = orch.repo
    files = repo.files
    for task_id in await repo.io(files.battle_task_ids):
        try:
            loaded = await repo.io(files.load_history, task_id)
            progress = await repo.io(files.load_progress, task_id)
        except Exception as exc:
            log.error("%s: cannot recover battle %s: %s", repo.name, task_id, exc)
            continue
        if loaded is None:
            continue
        if loaded.value.status in TERMINAL_BATTLE_STATUSES:
            worktree = loaded.value.worktree
            if worktree is not None and not worktree.removed:  # it ended mid-cleanup
                ended = ActiveBattle(loaded.value, Progress(task_id=task_id), task_id)
                await orch.end_worktree(ended)
                if worktree.removed:
                    await orch.save(ended, progress=False)
            continue
        battle = loaded.value
        prog = progress.value if progress else Progress(task_id=task_id)
        if prog.agent_pid:
            await anyio.to_thread.run_sync(end_recorded, prog.agent_pid, prog.agent_started)
        recorded = {i.number for i in battle.iterations}
        if prog.current_iteration and prog.current_iteration not in recorded:
            battle.iterations.append(
                Iteration(
                    number=prog.current_iteration,
                    started_at=prog.last_update,
                    ended_at=utcnow(),
                    result=IterationResult.CANCELLED,
                    error="the daemon stopped during this iteration",
                )
            )
        active = ActiveBattle(battle, prog, await _task_title(orch, task_id))
        prog.agent_pid = prog.agent_started = None
        prog.status = ProgressStatus.IDLE
        if battle.worktree is not None and not battle.worktree.removed:
            try:
                await worktrees.ensure(repo.path, battle.worktree)
            except (PokeralphError, worktrees.GitFailed, OSError) as exc:
                log.error("%s: the worktree of %s is lost: %s", repo.name, task_id, exc)
            active.workdir = Path(battle.worktree.path)
        if orch.battle_of(task_id) is not None:
            continue
        if battle.status == B.ESCALATED:
            # still waiting for a person (or answered, not yet acted on): stays so
            await _recover_escalated(orch, active)
            continue
        reason = "the daemon restarted; resume with `pokeralphctl battle resume`"
        for step in battle_path(battle.status, B.PAUSED):  # blocked: through running
            check_battle_transition(battle.status, step)
            battle.status = step
        battle.blocked = None
        battle.paused_reason = reason
        run = orch.adopt(active)
        await orch.save(active)
        await orch.sync_task_status(task_id, B.PAUSED)
        orch.publish(ev.BattlePaused(task_id=task_id, reason=reason, recovered=True))
        orch.host.launch(run, paused=True)
    await _sweep_worktrees(orch)


async def _sweep_worktrees(orch: BattleOrchestrator) -> None:
    """Worktrees no battle owns (a start or an end the previous daemon did not finish)
    are removed."""
    root = orch.host.worktree_root
    if root is None:
        return
    owned = {run.task_id for run in orch.runs()}
    try:
        removed = await worktrees.sweep(orch.repo.path, root, owned)
    except (worktrees.GitFailed, OSError, TimeoutError) as exc:
        log.warning("%s: sweeping worktrees failed: %s", orch.repo.name, exc)
        return
    if removed:
        log.info("%s: removed stray worktrees %s", orch.repo.name, ", ".join(removed))


async def _recover_escalated(orch: BattleOrchestrator, active: ActiveBattle) -> None:
    """An escalated battle after a restart: an answer recorded but not acted on is acted
    on now; else the person's inbox item is listened to again."""
    run = orch.adopt(active)
    await orch.save(active)
    await orch.sync_task_status(active.task_id, B.ESCALATED)
    if pending_resolution(active) is not None:
        orch.host.launch(run)
        return
    escalation = open_escalation(active)
    orch.host.launch(run, paused=True)
    if escalation is not None:
        for hook in orch.host.escalation_hooks:
            await hook.reopened(orch, active, escalation)


async def _task_title(orch: BattleOrchestrator, task_id: str) -> str:
    try:
        task, _ = await orch.repo.task(task_id)
    except Exception:
        return task_id
    return task.title
