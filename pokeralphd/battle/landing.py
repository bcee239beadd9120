"""A parallel battle's worktree at the battle's end: merged back into the branch it came
from (one merge into a repository at a time), or removed, its branch kept while it holds
work not merged (a failed battle's leftovers are committed on it first).

The git steps are :mod:`pokeralphd.battle.worktrees`'; this is what the battle makes of
them: the events (``battle_merged``, ``merge_failed``, ``worktree_removed``) and the record.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from pokeralphd.battle import worktrees
from pokeralphd.battle.gitservice import GitService
from pokeralphd.domain.statuses import BattleStatus as B
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralphd.battle.state import ActiveBattle
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)


class Save(Protocol):
    async def __call__(
        self, active: ActiveBattle, *, progress: bool = True, history: bool = True
    ) -> None: ...


class WorktreeLanding:
    def __init__(
        self, repo: RepoStore, publish: Callable[[ev.TaskEvent], None], save: Save
    ) -> None:
        self.repo = repo
        self.publish = publish
        self.save = save
        self._merge_lock = anyio.Lock()  # one merge back into this repository at a time

    async def end(self, active: ActiveBattle) -> None:
        """The battle ended: its worktree goes; its branch too when merged or cancelled
        (a failed battle's unmerged commits stay on it for the next attempt, an accepted
        conflict's for the person). Never fails the battle: a problem is logged."""
        worktree = active.battle.worktree
        if worktree is None or worktree.removed:
            return
        status = active.battle.status
        with anyio.CancelScope(shield=True):
            try:
                if status == B.FAILED:  # its unfinished work stays on its branch
                    await self._commit_leftovers(active)
                keep = status != B.CANCELLED and (
                    not worktree.merged and await worktrees.unmerged(self.repo.path, worktree)
                )
                await worktrees.remove(self.repo.path, worktree, delete_branch=not keep)
                worktree.removed = True
                self.publish(
                    ev.WorktreeRemoved(
                        task_id=active.task_id,
                        path=worktree.path,
                        branch=worktree.branch,
                        branch_kept=keep,
                    )
                )
            except Exception:
                log.warning(
                    "%s: cannot remove the worktree of %s",
                    self.repo.name,
                    active.task_id,
                    exc_info=True,
                )

    async def _commit_leftovers(self, active: ActiveBattle) -> None:
        worktree = active.battle.worktree
        assert worktree is not None
        message = GitService.format_commit_message(active.task_id, active.title)
        commit = await worktrees.commit_leftovers(
            worktree, f"{message}\n\nChanges the battle left uncommitted in its worktree."
        )
        if commit is not None:
            log.info("%s: committed what %s left in its worktree", self.repo.name, active.task_id)

    async def merge_back(self, active: ActiveBattle) -> str | None:
        worktree = active.battle.worktree
        if worktree is None or worktree.merged:
            return None
        config = await self.repo.config()
        # shielded: a rebase stopped halfway would leave the worktree mid-rebase (each git
        # command is bounded by its own timeout)
        with anyio.CancelScope(shield=True):
            async with self._merge_lock:
                try:
                    await self._commit_leftovers(active)
                    outcome = await worktrees.merge_back(
                        self.repo.path, worktree, config.merge_strategy
                    )
                except (worktrees.GitFailed, OSError, TimeoutError) as exc:
                    return f"merging {worktree.branch} into {worktree.base_branch} failed: {exc}"
        if not outcome.merged:
            self.publish(
                ev.MergeFailed(
                    task_id=active.task_id,
                    branch=worktree.branch,
                    into=worktree.base_branch,
                    reason=outcome.reason,
                    files=outcome.files,
                    message=outcome.message,
                )
            )
            return outcome.message
        worktree.merged = True
        worktree.merge_commit = outcome.tip
        await self.save(active, progress=False)
        self.publish(
            ev.BattleMerged(
                task_id=active.task_id,
                branch=worktree.branch,
                into=worktree.base_branch,
                commit=outcome.tip,
            )
        )
        return None
