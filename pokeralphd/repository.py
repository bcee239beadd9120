"""Repository: everything the daemon holds for one registered repository, typed.

Its store (config, PRD, tasks, the lock), its battles, its inbox and its planner, built
together by the composition root. Task edits go through here so that a task in a
battle cannot be edited under the battle's feet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.battle.orchestrator import BattleOrchestrator
    from pokeralphd.domain.models import PRD, Task
    from pokeralphd.errors import PokeralphError
    from pokeralphd.inbox.service import RepoInbox
    from pokeralphd.planning.service import RepoPlanner
    from pokeralphd.protocol.results import RepoRef
    from pokeralphd.store.repo_store import RepoStore


@dataclass(eq=False)
class Repository:
    store: RepoStore
    inbox: RepoInbox
    battles: BattleOrchestrator
    planner: RepoPlanner

    @property
    def name(self) -> str:
        return self.store.name

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def failure(self) -> PokeralphError | None:
        return self.store.failure

    @property
    def error(self) -> str | None:
        return self.store.error

    def describe(self) -> RepoRef:
        return self.store.describe()

    async def update_task(
        self, task_id: str, fields: dict[str, Any], expected: int | None
    ) -> tuple[Task, int]:
        """A person's edit: refused while the task is in a battle."""
        self.battles.ensure_task_editable(task_id)
        return await self.store.update_task(task_id, fields, expected)

    async def replace_prd(self, data: dict[str, Any], expected: int | None) -> tuple[PRD, int]:
        """A whole new PRD: refused while a battle is active, whose task it would replace."""
        self.battles.ensure_idle()
        return await self.store.replace_prd(data, expected)

    async def delete_task(self, task_id: str, expected: int | None) -> int:
        self.battles.ensure_task_editable(task_id)
        return await self.store.delete_task(task_id, expected)
