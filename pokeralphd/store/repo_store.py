"""RepoStore: one registered repository's documents: config layers, the PRD, its tasks.

It is the single writer of those files: every change goes through one lock, runs its
file I/O off the event loop, and is published as an event. It also holds the
repository's lock (one daemon per repository) and why the repository is unusable, if it
is. Battles, the inbox and planning are built on top of it (``pokeralphd.repository``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from pokeralphd.domain.ids import next_task_id, validate_task_id
from pokeralphd.domain.models import PRD, Config, Task
from pokeralphd.domain.statuses import TaskStatus, check_task_transition
from pokeralphd.domain.timeutil import utcnow
from pokeralphd.errors import InvalidParams, PokeralphError, RepoNotFound, TaskNotFound
from pokeralphd.store import config_layers
from pokeralphd.store.filemanager import FileManager
from pokeralphd.store.locks import RepoLock
from pokeralphd.validation import validated

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralphd.ports import EventSink
    from pokeralphd.store.registry import RepoEntry

R = TypeVar("R")


class RepoStore:
    def __init__(self, entry: RepoEntry, events: EventSink, user_config_file: Path) -> None:
        self.name = entry.name
        self.path = Path(entry.path)
        self.files = FileManager(self.path)
        self.lock = RepoLock(self.files.lock_path)
        self.write_lock = anyio.Lock()
        self.failure: PokeralphError | None = None  # why it is unusable (locked, missing)
        self._events = events
        self._user_config_file = user_config_file

    # -- plumbing
    def open(self) -> None:
        """Take the repository's lock and create ``.pokeralph/``; on failure, say why in
        :attr:`failure` (the repository stays registered but unusable)."""
        try:
            if not self.path.is_dir():
                raise RepoNotFound(f"{self.path} no longer exists", path=str(self.path))
            self.lock.acquire()
            self.files.init()
        except PokeralphError as exc:
            self.failure = exc

    def close(self) -> None:
        self.lock.release()

    def publish(self, type_: str, payload: dict[str, Any], task_id: str | None = None) -> None:
        self._events.publish(type_, self.name, payload, task_id)

    async def io(self, func: Callable[..., R], *args: Any) -> R:
        """Run blocking file I/O in a worker thread (not abandoned on cancel: writes finish)."""
        return await anyio.to_thread.run_sync(func, *args)

    @property
    def error(self) -> str | None:
        return self.failure.message if self.failure else None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "error": self.error}

    # -- config
    def _config(self) -> tuple[Config, dict[str, str], int]:
        # both layers; the repository's sensitive keys apply only if the user trusts them
        loaded = config_layers.load(self._user_config_file, self.files.config_path, self.path)
        return loaded.config, loaded.sources, loaded.version

    async def config(self) -> Config:
        config, _, _ = await self.io(self._config)
        return config

    async def config_get(self) -> dict[str, Any]:
        loaded = await self.io(
            config_layers.load,
            self._user_config_file,
            self.files.config_path,
            self.path,
        )
        return loaded.describe()

    async def config_update(self, patch: dict[str, Any], expected: int | None) -> dict[str, Any]:
        async with self.write_lock:
            version = await self.io(
                config_layers.update_repo_layer,
                self._user_config_file,
                self.files.config_path,
                self.path,
                patch,
                expected,
            )
        result = await self.config_get()
        self.publish(
            "config_updated", {"config": result["config"], "version": version, "patch": patch}
        )
        return result

    async def set_trust(self, trusted: bool, expected_hash: str | None) -> dict[str, Any]:
        """Record (or remove) the user's trust in the repository layer as it is now."""
        async with self.write_lock:  # no config.update of this repository in between
            trust, values, changed = await self.io(
                config_layers.set_trust,
                self._user_config_file,
                self.files.config_path,
                self.path,
                trusted,
                expected_hash,
            )
        if changed:  # the effective config may differ now
            current = await self.config_get()
            self.publish(
                "config_updated",
                {"config": current["config"], "version": current["version"], "patch": {}},
            )
        return {
            "repo": self.name,
            "path": str(self.path),
            "changed": changed,
            "trust": trust.describe(),
            "sensitiveValues": values,
        }

    # -- PRD
    async def prd(self) -> tuple[PRD | None, int]:
        loaded = await self.io(self.files.load_prd)
        return (loaded.value, loaded.version) if loaded else (None, 0)

    def _default_prd(self) -> PRD:
        return PRD(name=self.name, description=f"Tasks for {self.name}")

    async def update_prd(
        self,
        change: Callable[[PRD], PRD],
        expected: int | None,
        event: str,
        payload: Callable[[PRD], dict[str, Any]],
        task_id: str | None = None,
    ) -> tuple[PRD, int]:
        """Load (or create) the PRD, apply ``change``, validate, save, publish ``event``."""
        async with self.write_lock:
            loaded = await self.io(self.files.load_prd)
            prd = loaded.value if loaded else self._default_prd()
            new = change(prd.model_copy(deep=True))
            new = validated(PRD, new.model_dump(by_alias=True), "PRD")
            new.updated_at = utcnow()
            version = await self.io(self.files.save_prd, new, expected)
        data = payload(new)
        data["version"] = version
        self.publish(event, data, task_id)
        return new, version

    async def replace_prd(self, data: dict[str, Any], expected: int | None) -> tuple[PRD, int]:
        new = validated(PRD, data, "PRD", "prd")
        return await self.update_prd(
            lambda _old: new, expected, "prd_updated", lambda p: {"prd": p.dump()}
        )

    # -- tasks
    async def task(self, task_id: str) -> tuple[Task, int]:
        validate_task_id(task_id)
        prd, version = await self.prd()
        task = prd.task(task_id) if prd else None
        if task is None:
            raise TaskNotFound(task_id, self.name)
        return task, version

    async def create_task(
        self, fields: dict[str, Any], wanted_id: str | None, expected: int | None
    ) -> tuple[Task, int]:
        used_ids = await self.io(self.files.battle_task_ids)
        created: list[Task] = []

        def change(prd: PRD) -> PRD:
            existing = [t.id for t in prd.tasks]
            if wanted_id is not None:
                validate_task_id(wanted_id)
                if wanted_id in existing:
                    raise InvalidParams(f"task id {wanted_id!r} already exists", field="id")
                task_id = wanted_id
            else:
                task_id = next_task_id(fields.get("title", ""), existing + used_ids)
            data = dict(fields)
            data.setdefault("priority", len(prd.tasks) + 1)
            task = validated(Task, {"id": task_id, **data}, "task")
            prd.tasks.append(task)
            created.append(task)
            return prd

        _, version = await self.update_prd(
            change, expected, "task_created", lambda _p: {"task": created[0].dump()}, None
        )
        return created[0], version

    async def update_task(
        self, task_id: str, fields: dict[str, Any], expected: int | None
    ) -> tuple[Task, int]:
        validate_task_id(task_id)
        updated: list[Task] = []

        def change(prd: PRD) -> PRD:
            task = prd.task(task_id)
            if task is None:
                raise TaskNotFound(task_id, self.name)
            data = task.model_dump(by_alias=True)
            if "status" in fields:
                check_task_transition(task.status, TaskStatus(fields["status"]))
            data.update(fields)
            data["updatedAt"] = utcnow()
            new_task = validated(Task, data, "task")
            prd.tasks[prd.tasks.index(task)] = new_task
            updated.append(new_task)
            return prd

        _, version = await self.update_prd(
            change,
            expected,
            "task_updated",
            lambda _p: {"task": updated[0].dump(), "changed": sorted(fields)},
            task_id,
        )
        return updated[0], version

    async def delete_task(self, task_id: str, expected: int | None) -> int:
        validate_task_id(task_id)

        def change(prd: PRD) -> PRD:
            task = prd.task(task_id)
            if task is None:
                raise TaskNotFound(task_id, self.name)
            prd.tasks.remove(task)
            return prd

        _, version = await self.update_prd(
            change, expected, "task_deleted", lambda _p: {"taskId": task_id}, task_id
        )
        return version
