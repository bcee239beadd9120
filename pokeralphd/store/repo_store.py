"""RepoStore: one registered repository's documents: config layers, the PRD, its tasks.

It is the single writer of those files: every change runs its file I/O off the event
loop and is published as an event. Config changes go through one lock; the PRD is kept
in memory and written by group commit (:mod:`pokeralphd.store.commit`): changes that
arrive together share one durable write, each with its own version. It also holds the
repository's lock (one daemon per repository) and why the repository is unusable, if it
is. Battles, the inbox and planning are built on top of it (``pokeralphd.repository``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, SupportsIndex, TypeVar, overload

import anyio
from pydantic import ValidationError

from pokeralph_core.config import layers as config_layers
from pokeralph_core.timeutil import utcnow
from pokeralphd.domain.ids import next_task_id, validate_task_id
from pokeralphd.domain.models import PRD, Battle, Progress, Task, check_dependencies
from pokeralphd.domain.statuses import TaskStatus, check_task_transition
from pokeralphd.errors import InvalidParams, PokeralphError, RepoNotFound, TaskNotFound
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.results import ConfigResult, RepoRef, TrustResult
from pokeralphd.store import config_views, config_writes, local_defaults
from pokeralphd.store.commit import DocumentFile, Signature, signature_of
from pokeralphd.store.filemanager import HISTORY_KIND, PRD_KIND, PROGRESS_KIND, FileManager
from pokeralphd.store.history_body import HistoryBodies
from pokeralphd.store.locks import LOCK_GRACE, RepoLock
from pokeralphd.store.rules import USAGE_FILE, EffectiveRule, Rules, RuleStore
from pokeralphd.validation import validated

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pokeralph_core.approval import ApprovalRule, RuleSource, RuleUsage
    from pokeralph_core.config.model import Config
    from pokeralphd.ports import EventSink
    from pokeralphd.store.registry import RepoEntry

R = TypeVar("R")
_TASK_ID = attrgetter("id")


class RepoStore:
    def __init__(
        self,
        entry: RepoEntry,
        events: EventSink,
        user_config_file: Path,
        user_state_dir: Path | None = None,
    ) -> None:
        self.name = entry.name
        self.path = Path(entry.path)
        self.files = FileManager(self.path)
        self.lock = RepoLock(self.files.lock_path)
        self.write_lock = anyio.Lock()
        self.failure: PokeralphError | None = None  # why it is unusable (locked, missing)
        self._events = events
        self._user_config_file = user_config_file
        self._user_state_dir = user_state_dir or user_config_file.parent
        # the PRD in memory, written by group commit; the tasks' encodings are kept
        self._prd = DocumentFile(PRD_KIND, self.files.prd_path, fragments_of="tasks")
        self._battle_files: dict[str, BattleFiles] = {}
        self._config_kept: tuple[tuple[Signature | None, Signature | None], Config] | None = None
        self._battle_ids_seen: tuple[int, list[str]] = (0, [])  # (PRD write, ids)
        # approval rules: in the config layers; their usage in state files of the daemon
        self.rules_store = RuleStore(
            user_config_file,
            self.files.config_path,
            self.path,
            self.files.dir / USAGE_FILE,
            (user_state_dir or user_config_file.parent) / USAGE_FILE,
        )

    # -- plumbing
    def open(self, lock_grace: float = LOCK_GRACE) -> None:
        """Take the repository's lock and create ``.pokeralph/``; on failure, say why in
        :attr:`failure` (the repository stays registered but unusable). ``lock_grace``:
        how long a dead daemon's lock may be waited for (:meth:`RepoLock.acquire`)."""
        try:
            if not self.path.is_dir():
                raise RepoNotFound(f"{self.path} no longer exists", path=str(self.path))
            self.lock.acquire(lock_grace)
            self.files.init()
        except PokeralphError as exc:
            self.failure = exc

    def close(self) -> None:
        self.lock.release()

    def publish(self, event: ev.Payload, task_id: str | None = None) -> None:
        self._events.publish(event, self.name, task_id)

    async def io(self, func: Callable[..., R], *args: Any) -> R:
        """Run blocking file I/O in a worker thread (not abandoned on cancel: writes finish)."""
        return await anyio.to_thread.run_sync(func, *args)

    @property
    def error(self) -> str | None:
        return self.failure.message if self.failure else None

    def describe(self) -> RepoRef:
        return RepoRef(name=self.name, path=str(self.path), error=self.error)

    # -- config
    def _config(self) -> Config:
        """(blocking) The effective config: both layers, the repository's sensitive keys
        only if the user trusts them. Read and merged again only when one of the two
        files changed (their signatures: a battle asks before every step, and a full
        load costs ~0.25 ms); a deep copy each time, so no caller changes the kept one."""
        user = self._user_config_file
        key = (_stat_key(user) if user is not None else None, _stat_key(self.files.config_path))
        kept = self._config_kept
        if kept is None or kept[0] != key:
            loaded = config_layers.load(user, self.files.config_path, self.path)
            self._config_kept = kept = (key, loaded.config)
        return kept[1].model_copy(deep=True)

    async def config(self) -> Config:
        return await self.io(self._config)

    async def config_get(self) -> ConfigResult:
        loaded = await self.io(
            config_layers.load,
            self._user_config_file,
            self.files.config_path,
            self.path,
        )
        return config_views.config_result(loaded)

    async def config_update(self, patch: dict[str, Any], expected: int | None) -> ConfigResult:
        """Apply ``patch`` to the repository layer; the ``config.get`` result as this write
        left it, with the version this write produced.

        Read and written under the write lock, and described before letting go of it: a
        description read after (as it once was) showed whichever write came last, so
        fifty writers at once got versions twice and others never (issue 22)."""
        async with self.write_lock:
            result = await self.io(self._config_update, patch, expected)
            self.publish(
                ev.ConfigUpdated(config=result.config, version=result.version, patch=patch)
            )
        return result

    def _config_update(self, patch: dict[str, Any], expected: int | None) -> ConfigResult:
        version = config_writes.update_repo_layer(
            self._user_config_file, self.files.config_path, self.path, patch, expected
        )
        loaded = config_layers.load(self._user_config_file, self.files.config_path, self.path)
        # the layer is this daemon's alone (its lock), so the file holds our version; a
        # hand edit landing in between would show, but the version is the one we wrote
        return config_views.config_result(loaded, version)

    async def config_set_in_effect(self, dotted: str, value: Any) -> str:
        """Set one key where its value takes effect for this repository: its own layer
        when that sets the key and applies, else the user's (a sensitive key of an
        untrusted repository layer is ignored, so writing it there would change nothing).
        The layer written: "repo" or "user"."""
        patch = config_layers.dotted_patch(dotted, value)
        async with self.write_lock:
            loaded = await self.io(
                config_layers.load, self._user_config_file, self.files.config_path, self.path
            )
            layer = config_layers.layer_in_effect(loaded, dotted)
            if layer == "repo":
                await self.io(
                    config_writes.update_repo_layer,
                    self._user_config_file,
                    self.files.config_path,
                    self.path,
                    patch,
                    None,
                )
            else:
                await self.io(config_writes.update_user_layer, self._user_config_file, patch)
        await self._config_changed()
        return layer

    async def set_trust(self, trusted: bool, expected_hash: str | None) -> TrustResult:
        """Record (or remove) the user's trust in the repository layer as it is now."""
        async with self.write_lock:  # no config.update of this repository in between
            trust, values, changed = await self.io(
                config_writes.set_trust,
                self._user_config_file,
                self.files.config_path,
                self.path,
                trusted,
                expected_hash,
            )
        if changed:  # the effective config may differ now
            current = await self.config_get()
            self.publish(ev.ConfigUpdated(config=current.config, version=current.version, patch={}))
        return TrustResult(
            repo=self.name,
            path=str(self.path),
            changed=changed,
            trust=config_views.trust_state(trust),
            sensitive_values=values,
        )

    # -- approval rules
    async def rules(self) -> Rules:
        """The effective approval rules (the repository's, then the user's), with usage;
        :meth:`Rules.decide` says which one decides a call."""
        return await self.io(self.rules_store.current)

    async def add_rule(self, rule: ApprovalRule, scope: RuleSource) -> EffectiveRule:
        async with self.write_lock:
            added = await self.io(self.rules_store.add, rule, scope)
        await self._config_changed()
        return added

    async def remove_rule(self, rule_id: str) -> list[EffectiveRule]:
        async with self.write_lock:
            removed = await self.io(self.rules_store.remove, rule_id)
        await self._config_changed()
        return removed

    async def install_local_defaults(self) -> list[str]:
        """The local agent's read-only default rules, into the user's layer once (the
        ones a person removed are not brought back); the ids added."""
        added: list[str] = await self.io(
            local_defaults.install_defaults, self._user_config_file, self._user_state_dir
        )
        if added:
            await self._config_changed()
        return added

    async def record_rule_use(self, source: RuleSource, rule_id: str) -> RuleUsage:
        """Count one use of a rule that decided a call, durably (not in the config)."""
        return await self.io(self.rules_store.record_use, source, rule_id, utcnow())

    async def _config_changed(self) -> None:
        current = await self.config_get()
        self.publish(ev.ConfigUpdated(config=current.config, version=current.version, patch={}))

    # -- PRD
    async def prd(self) -> tuple[PRD | None, int]:
        """The PRD as it is on disk (from memory unless the file changed) and its version."""
        state = await self.io(self._prd.current)
        return (_copy(state.value), state.version) if state.value is not None else (None, 0)

    def _default_prd(self) -> PRD:
        return PRD(name=self.name, description=f"Tasks for {self.name}")

    async def update_prd(
        self, change: Callable[[PRD], PRD], expected: int | None
    ) -> tuple[PRD, int]:
        """Apply ``change`` to the PRD (or a new one), validate, save, publish
        ``prd_updated``.

        ``change`` gets a copy of the PRD whose task list is its own; it may add, remove
        or replace tasks and set the PRD's fields, but never change a task in place (the
        tasks are shared with what is on disk): build a new one. Changes arriving
        together are written together (:mod:`pokeralphd.store.commit`); the event goes
        out once the write holding this change is durable, with the version it got.
        """
        new, version = await self._update_prd(
            change, expected, lambda p, v: ev.PrdUpdated(prd=p.dump(), version=v), None
        )
        return _copy(new), version

    async def _update_prd(
        self,
        change: Callable[[PRD], PRD],
        expected: int | None,
        event: Callable[[PRD, int], ev.Payload],
        task_id: str | None,
    ) -> tuple[PRD, int]:
        """:meth:`update_prd`, returning the PRD now stored itself (not to be changed);
        ``event`` makes what is published, from the PRD stored and its version."""

        def apply(current: PRD | None) -> PRD:
            base = current if current is not None else self._default_prd()
            working = _copy(base)
            new = _revalidated(change(working), base, working)
            new.updated_at = utcnow()
            return new

        def published(new: PRD, version: int) -> None:
            self.publish(event(new, version), task_id)

        return await self._prd.update(apply, expected, published)

    async def replace_prd(self, data: dict[str, Any], expected: int | None) -> tuple[PRD, int]:
        new = validated(PRD, data, "PRD", "prd")
        return await self.update_prd(lambda _old: new, expected)

    # -- tasks
    async def task(self, task_id: str) -> tuple[Task, int]:
        validate_task_id(task_id)
        state = await self.io(self._prd.current)
        task = state.value.task(task_id) if state.value is not None else None
        if task is None:
            raise TaskNotFound(task_id, self.name)
        return task.model_copy(deep=True), state.version

    async def create_task(
        self, fields: dict[str, Any], wanted_id: str | None, expected: int | None
    ) -> tuple[Task, int]:
        created: list[Task] = []

        def change(prd: PRD) -> PRD:
            if wanted_id is not None:
                validate_task_id(wanted_id)
                if wanted_id in map(_TASK_ID, prd.tasks):
                    raise InvalidParams(f"task id {wanted_id!r} already exists", field="id")
                task_id = wanted_id
            else:
                # every id is NUMBER-slug: the one with the highest number is all
                # next_task_id looks for (one id is quicker to search than 900); an old
                # battle's number stays taken
                ids = [*map(_TASK_ID, prd.tasks), *self._battle_ids()]
                top = max(ids, key=_task_number, default=None)
                try:
                    task_id = next_task_id(fields.get("title", ""), [top] if top else [])
                except ValueError as exc:  # no number left that fits in an id
                    raise InvalidParams(str(exc), field="id") from exc
            data = dict(fields)
            data.setdefault("priority", len(prd.tasks) + 1)
            task = validated(Task, {"id": task_id, **data}, "task")
            if task.depends_on:
                _check_dependencies([*prd.tasks, task])
            prd.tasks.append(task)
            created.append(task)
            return prd

        _, version = await self._update_prd(
            change,
            expected,
            lambda _p, v: ev.TaskCreated(task=created[-1].dump(), version=v),
            None,
        )
        return created[-1], version

    async def update_task(
        self, task_id: str, fields: dict[str, Any], expected: int | None
    ) -> tuple[Task, int]:
        validate_task_id(task_id)
        updated: list[Task] = []

        def change(prd: PRD) -> PRD:
            index = self._index(prd, task_id)
            task = prd.tasks[index]
            data = task.model_dump(by_alias=True)
            if "status" in fields:
                check_task_transition(task.status, TaskStatus(fields["status"]))
            data.update(fields)
            data["updatedAt"] = utcnow()
            new_task = validated(Task, data, "task")
            if "dependsOn" in fields:
                _check_dependencies([*prd.tasks[:index], new_task, *prd.tasks[index + 1 :]])
            prd.tasks[index] = new_task
            updated.append(new_task)
            return prd

        _, version = await self._update_prd(
            change,
            expected,
            lambda _p, v: ev.TaskUpdated(
                task=updated[-1].dump(), changed=sorted(fields), version=v
            ),
            task_id,
        )
        return updated[-1], version

    async def delete_task(self, task_id: str, expected: int | None) -> int:
        validate_task_id(task_id)

        def change(prd: PRD) -> PRD:
            index = self._index(prd, task_id)
            dependents = [t.id for t in prd.tasks if task_id in t.depends_on]
            if dependents:
                raise InvalidParams(
                    f"{', '.join(dependents)} depend(s) on {task_id}: change their dependsOn first",
                    field="taskId",
                    dependents=dependents,
                )
            del prd.tasks[index]
            return prd

        _, version = await self._update_prd(
            change, expected, lambda _p, v: ev.TaskDeleted(task_id=task_id, version=v), task_id
        )
        return version

    def _battle_ids(self) -> list[str]:
        """(in a PRD write) The task ids of the battle folders, listed once per write
        however many creates it carries."""
        batch = self._prd.batches
        if self._battle_ids_seen[0] != batch:
            self._battle_ids_seen = (batch, self.files.battle_task_ids())
        return self._battle_ids_seen[1]

    def _index(self, prd: PRD, task_id: str) -> int:
        """Where ``task_id`` is in the PRD's tasks (one pass in C, not a loop of __eq__)."""
        try:
            return list(map(_TASK_ID, prd.tasks)).index(task_id)
        except ValueError:
            raise TaskNotFound(task_id, self.name) from None

    # -- battle files (written by the battle orchestrator alone)
    def battle_files(self, task_id: str) -> BattleFiles:
        """The history and progress documents of ``task_id``'s battle, kept in memory
        while the battle goes on."""
        files = self._battle_files.get(task_id)
        if files is None:
            files = self._battle_files[task_id] = BattleFiles(
                DocumentFile(HISTORY_KIND, self.files.history_path(task_id)),
                DocumentFile(PROGRESS_KIND, self.files.progress_path(task_id)),
            )
        return files

    def forget_battle_files(self, task_id: str) -> None:
        """Drop what is kept of a battle that ended (its files stay as written)."""
        self._battle_files.pop(task_id, None)


def _stat_key(path: Path) -> Signature | None:
    """What tells that a config layer's file changed: its signature, through a link (a
    dotfile manager links the user's file), None when it cannot be looked at (then the
    load says why)."""
    try:
        return signature_of(os.stat(path))
    except OSError:
        return None


@dataclass(frozen=True)
class BattleFiles:
    history: DocumentFile[Battle]
    progress: DocumentFile[Progress]
    bodies: HistoryBodies = field(default_factory=HistoryBodies)  # history's, built cheaply


class _Tasks(list[Task]):
    """A task list that remembers every task put into it: after a change, those are the
    only tasks that may need validating (the others are the PRD's own, validated)."""

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        super().__init__(tasks)
        self.added: list[Task] = []

    def append(self, task: Task) -> None:
        self.added.append(task)
        super().append(task)

    def extend(self, tasks: Iterable[Task]) -> None:
        tasks = list(tasks)
        self.added += tasks
        super().extend(tasks)

    def insert(self, index: SupportsIndex, task: Task) -> None:
        self.added.append(task)
        super().insert(index, task)

    def __iadd__(self, tasks: Iterable[Task]) -> Self:  # type: ignore[override,misc]
        self.extend(tasks)
        return self

    @overload
    def __setitem__(self, index: SupportsIndex, value: Task) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Task]) -> None: ...
    def __setitem__(self, index: SupportsIndex | slice, value: Any) -> None:
        if isinstance(index, slice):
            value = list(value)
            self.added += value
        else:
            self.added.append(value)
        super().__setitem__(index, value)


def _copy(prd: PRD) -> PRD:
    """A PRD of its own fields and task list, sharing the (never changed) tasks."""
    metadata = prd.metadata.model_copy() if prd.metadata is not None else None
    return prd.model_copy(update={"tasks": _Tasks(prd.tasks), "metadata": metadata})


def _revalidated(new: PRD, base: PRD, working: PRD) -> PRD:
    """What ``change`` made of ``working`` (a :func:`_copy` of ``base``), validated as a
    PRD read from disk would be, with the field of the first error named.

    Tasks kept from ``base`` (the same objects, validated when they came in and never
    changed in place) are taken as they are; only the tasks the change put into the
    list (``_Tasks.added``) are validated from their fields. ``working``'s own fields
    were validated as they were set. A PRD the change built itself, or a list it set
    anew, is validated as a whole but for the tasks kept from ``base``. So a change to
    one task of a 20 MB PRD costs what that task costs, not what the PRD does.
    """
    tasks = new.tasks
    # the usual case, in time proportional to what changed (plus a set of the ids)
    unique = len(set(map(_TASK_ID, tasks))) == len(tasks)
    if new is working and isinstance(tasks, _Tasks) and unique:
        try:
            for task in tasks.added:  # (one removed again is checked all the same)
                Task.model_validate(task.model_dump(by_alias=True))
        except ValidationError:
            pass  # validated again below, which names the task and field
        else:
            return new
    kept = set(map(id, base.tasks))  # base holds them: no id() is reused meanwhile
    data = new.model_dump(by_alias=True, exclude={"tasks"})
    data["tasks"] = [t if id(t) in kept else t.model_dump(by_alias=True) for t in tasks]
    return validated(PRD, data, "PRD")  # names what is wrong (a duplicate id, ...)


def _task_number(task_id: str) -> int:
    """The number of a NUMBER-slug task id (ASCII digits, validated before)."""
    return int(task_id.split("-", 1)[0])


def _check_dependencies(tasks: list[Task]) -> None:
    """The tasks' ``dependsOn`` as a clear error on the field (issue 14)."""
    try:
        check_dependencies(tasks)
    except ValueError as exc:
        raise InvalidParams(str(exc), field="dependsOn") from exc
