"""What a repository's battles were and are, read without changing anything.

The queries of ``battle.history``, ``battle.progress``, ``battle.diff``, ``battle.log``
and ``battle.report``: an active battle is read live from its owner's state (through
``live``, which only reads), an ended one from its files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

import anyio

from pokeralph_core import safefs
from pokeralphd.battle.gitservice import GitService
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.errors import InvalidParams, NotFound
from pokeralphd.protocol.results import (
    DiffResult,
    HistoryResult,
    LogResult,
    ProgressResult,
    ReportResult,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pokeralphd.battle.state import ActiveBattle
    from pokeralphd.domain.models import Battle
    from pokeralphd.store.repo_store import RepoStore


class BattleQueries:
    """One repository's battle queries."""

    def __init__(self, repo: RepoStore, live: Callable[[str], ActiveBattle | None]) -> None:
        self.repo = repo
        self._live = live

    async def report(
        self, task_id: str, phase: Literal["verification", "review"], cycle: int | None
    ) -> ReportResult:
        """A verification or review report of the task's battle (default: the latest)."""
        validate_task_id(task_id)
        if phase not in ("verification", "review"):
            raise InvalidParams("phase must be verification or review", field="phase")
        if cycle is None:
            record, _ = await self._record(task_id)
            cycles = None if record is None else getattr(record, phase)
            cycle = cycles.count if cycles is not None else 0
            if not cycle:
                raise NotFound(f"no {phase} report for {task_id} yet", taskId=task_id)
        if not 0 < cycle <= 1000:
            raise InvalidParams("cycle must be between 1 and 1000", field="cycle")
        loaded = await self.repo.io(self.repo.files.load_report, task_id, phase, cycle)
        if loaded is None:
            raise NotFound(f"no {phase} report {cycle} for {task_id}", taskId=task_id, cycle=cycle)
        return ReportResult(phase=phase, report=loaded.value.dump(), version=loaded.version)

    async def _record(self, task_id: str) -> tuple[Battle | None, int | None]:
        """The task's battle record (live while it is active) and its file's version
        (None for a live one): read as the model, never from its own dump."""
        validate_task_id(task_id)
        if (active := self._live(task_id)) is not None:
            return active.battle, None
        loaded = await self.repo.io(self.repo.files.load_history, task_id)
        return (loaded.value, loaded.version) if loaded else (None, 0)

    async def history(self, task_id: str) -> HistoryResult:
        record, version = await self._record(task_id)
        battle = record.dump() if record else None
        if version is None:  # live
            return HistoryResult(battle=battle)
        return HistoryResult(battle=battle, version=version)

    async def diff(self, task_id: str, iteration: int | None, limit: int) -> DiffResult:
        """The diff of the commit an iteration made (default: the latest that made one)."""
        record, _ = await self._record(task_id)
        committed = [i for i in (record.iterations if record else []) if i.commit_hash]
        if iteration is not None:
            committed = [i for i in committed if i.number == iteration]
        if not committed:
            which = f"iteration {iteration}" if iteration is not None else "any iteration"
            raise NotFound(
                f"{task_id}: {which} made no commit", taskId=task_id, iteration=iteration
            )
        chosen = committed[-1]
        commit = chosen.commit_hash
        assert commit is not None
        git = GitService(self.repo.path)
        text, truncated = await anyio.to_thread.run_sync(git.show, commit, limit)
        return DiffResult(
            task_id=task_id, iteration=chosen.number, commit=commit, diff=text, truncated=truncated
        )

    async def progress(self, task_id: str) -> ProgressResult:
        validate_task_id(task_id)
        if (active := self._live(task_id)) is not None:
            return ProgressResult(progress=active.progress.dump())
        loaded = await self.repo.io(self.repo.files.load_progress, task_id)
        return ProgressResult(progress=loaded.value.dump() if loaded else None)

    async def log(
        self, task_id: str, iteration: int | None, offset: int | None, tail: int | None, limit: int
    ) -> LogResult:
        validate_task_id(task_id)
        files = self.repo.files
        if iteration is None:
            record, _ = await self._record(task_id)
            active = self._live(task_id)
            current = active.progress.current_iteration if active else 0
            numbers = [i.number for i in record.iterations] if record else []
            iteration = max([*numbers, current]) or None
            if iteration is None:
                raise NotFound(f"no iteration log for {task_id} yet", taskId=task_id)
        if not 0 < limit <= 4 << 20:
            raise InvalidParams("limit must be between 1 and 4194304 bytes", field="limit")
        path = files.log_path(task_id, iteration)
        if not await self.repo.io(safefs.is_file, path):
            raise NotFound(
                f"no log for {task_id} iteration {iteration}", taskId=task_id, iteration=iteration
            )
        if tail is not None:
            data, size = await self.repo.io(_tail_lines, path, tail, limit)
            start = size - len(data)
        else:
            data, size = await self.repo.io(files.read_log, task_id, iteration, offset or 0, limit)
            start = max(0, size + (offset or 0)) if (offset or 0) < 0 else min(offset or 0, size)
        return LogResult(
            iteration=iteration,
            data=data.decode("utf-8", errors="replace"),
            offset=start,
            next_offset=start + len(data),
            size=size,
        )


def _tail_lines(path: Path, lines: int, limit: int) -> tuple[bytes, int]:
    with os.fdopen(safefs.open_file(path, os.O_RDONLY), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read()
    if lines <= 0:
        return b"", size
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
        data = b"\n".join(parts[-lines:]) + b"\n"
    else:
        data = b"\n".join(parts[-lines:])
    return data, size
