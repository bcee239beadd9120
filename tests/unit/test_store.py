"""Store: atomic versioned documents, corrupt files named precisely, config layering."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from pokeralph_core import atomic, documents
from pokeralph_core.config import layers as config_layers
from pokeralph_core.documents import DocumentKind, decode_document, load, save
from pokeralphd.domain.models import PRD, Progress, Task
from pokeralphd.errors import CorruptFile, InvalidParams, RepoLocked, StorageError, VersionConflict
from pokeralphd.store.filemanager import PRD_KIND, FileManager
from pokeralphd.store.locks import LOCK_GRACE, RepoLock
from tests.helpers import dead_pid, let_go, lock_holder


def _prd() -> PRD:
    return PRD(
        name="p",
        description="d",
        tasks=[Task(id="001-a", title="A", description="d", acceptance_criteria=["c"])],
    )


def test_prd_round_trip_with_versions(tmp_path: Path) -> None:
    fm = FileManager(tmp_path)
    fm.init()
    assert fm.load_prd() is None
    prd = _prd()
    assert documents.save(PRD_KIND, fm.prd_path, prd) == 1
    assert documents.save(PRD_KIND, fm.prd_path, prd, expected_version=1) == 2
    loaded = fm.load_prd()
    assert loaded is not None and loaded.version == 2 and loaded.value == prd
    raw = json.loads(fm.prd_path.read_text())
    assert raw["schemaVersion"] == 2 and raw["version"] == 2


def test_stale_version_is_a_conflict_and_writes_nothing(tmp_path: Path) -> None:
    fm = FileManager(tmp_path)
    documents.save(PRD_KIND, fm.prd_path, _prd())
    before = fm.prd_path.read_bytes()
    with pytest.raises(VersionConflict) as info:
        documents.save(PRD_KIND, fm.prd_path, _prd(), 0)
    assert info.value.data == {"file": str(fm.prd_path), "expected": 0, "actual": 1}
    assert fm.prd_path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        ('{"name": "p", "description": "d", "tasks": [{"id": "bad"}]}', "tasks[0].id", None),
        ('{"name": "p", "description": ""}', "description", None),
        ('{"name": "p"', None, "invalid JSON at line 1"),
        ("[]", None, "expected a JSON object"),
        ('{"schemaVersion": 99, "name": "p", "description": "d"}', "schemaVersion", None),
        ('{"version": "x", "name": "p", "description": "d"}', "version", None),
    ],
)
def test_corrupt_files_are_named_and_never_overwritten(
    tmp_path: Path, content: str, field: str | None, reason: str | None
) -> None:
    fm = FileManager(tmp_path)
    fm.init()
    fm.prd_path.write_text(content)
    with pytest.raises(CorruptFile) as info:
        fm.load_prd()
    assert info.value.data["file"] == str(fm.prd_path)
    if field:
        assert info.value.data["field"] == field
    if reason:
        assert reason in info.value.data["reason"]
    with pytest.raises(CorruptFile):
        documents.save(PRD_KIND, fm.prd_path, _prd())
    assert fm.prd_path.read_text() == content


def test_migrations_run_in_order(tmp_path: Path) -> None:
    kind = DocumentKind(
        "progress",
        Progress,
        schema_version=3,
        migrations={
            1: lambda d: {"taskId": d.pop("task"), **d},
            2: lambda d: {**d, "logs": d.get("logs", [])[-2:]},
        },
    )
    raw = {"schemaVersion": 1, "version": 4, "task": "001-a", "logs": ["a", "b", "c"]}
    loaded = decode_document(kind, tmp_path / "p.json", raw)
    assert (
        loaded.value.task_id == "001-a" and loaded.value.logs == ["b", "c"] and loaded.version == 4
    )
    save(kind, tmp_path / "p.json", loaded.value)
    assert json.loads((tmp_path / "p.json").read_text())["schemaVersion"] == 3
    assert load(kind, tmp_path / "p.json") is not None


def test_atomic_write_failure_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    atomic.atomic_write(target, b"old")

    def full_disk(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StorageError) as info:
        atomic.atomic_write(target, b"new")
    assert "no space left" in info.value.message
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_paths_reject_hostile_ids(tmp_path: Path) -> None:
    fm = FileManager(tmp_path)
    for bad in ("../../etc", "001-a/../../x", "/abs"):
        with pytest.raises(ValueError):
            fm.progress_path(bad)
    with pytest.raises(ValueError):
        fm.log_path("001-a", 0)


def test_log_reads_with_offset_and_tail(tmp_path: Path) -> None:
    fm = FileManager(tmp_path)
    fm.append_log("001-a", 1, b"hello ")
    fm.append_log("001-a", 1, b"world")
    assert fm.read_log("001-a", 1) == (b"hello world", 11)
    assert fm.read_log("001-a", 1, offset=6) == (b"world", 11)
    assert fm.read_log("001-a", 1, offset=-5) == (b"world", 11)
    assert fm.read_log("001-a", 1, offset=0, limit=5) == (b"hello", 11)


def test_config_layers(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    repo = tmp_path / "repo.json"
    user.write_text(json.dumps({"mode": "yolo", "agent": {"backend": "codex", "model": "m"}}))
    repo.write_text(json.dumps({"schemaVersion": 1, "version": 3, "feedbackLoops": ["test"]}))
    loaded = config_layers.load(user, repo)
    config, sources = loaded.config, loaded.sources
    assert config.mode == "yolo" and config.agent.backend == "codex" and config.agent.model == "m"
    assert config.feedback_loops == ["test"]
    assert (
        sources["mode"] == "user"
        and sources["agent"] == "user"
        and sources["feedbackLoops"] == "repo"
        and sources["timeoutMinutes"] == "default"
    )
    repo.write_text(json.dumps({"timeoutMinutes": 999}))
    with pytest.raises(CorruptFile) as info:
        config_layers.load(user, repo)
    assert info.value.data == {
        "file": str(repo),
        "field": "timeoutMinutes",
        "reason": info.value.data["reason"],
    }
    with pytest.raises(InvalidParams):
        config_layers.validate({"mode": "x"}, None)
    assert config_layers.merge(
        {"a": 1, "agent": {"x": 1}}, {"a": None, "agent": {"x": None, "y": 2}}
    ) == {"agent": {"y": 2}}


def test_repo_lock_is_exclusive(tmp_path: Path) -> None:
    first = RepoLock(tmp_path / ".pokeralph" / "daemon.lock")
    first.acquire()
    second = RepoLock(tmp_path / ".pokeralph" / "daemon.lock")
    with pytest.raises(RepoLocked) as info:
        second.acquire()
    assert info.value.data["pid"] == os.getpid()
    first.release()
    second.acquire()
    second.release()


def test_a_dead_daemons_repo_lock_still_held_is_waited_for_then_said(tmp_path: Path) -> None:
    """As the socket's lock (test_hardening_fs): a repository lock naming a daemon that has
    ended, still held by a process it started, is waited for; one that stays held is
    refused after LOCK_GRACE, saying how to find the holder."""
    path = tmp_path / ".pokeralph" / "daemon.lock"
    path.parent.mkdir()
    holder = lock_holder(path, dead_pid())
    waited: list[float] = []

    def wait(seconds: float) -> None:
        if not waited:
            let_go(holder)
        waited.append(seconds)

    lock = RepoLock(path, sleep=wait)
    try:
        lock.acquire()
    finally:
        if holder.poll() is None:
            let_go(holder)
    assert waited and path.read_text() == f"{os.getpid()}\n"
    lock.release()
    gone = dead_pid()
    holder = lock_holder(path, gone)
    now = [0.0]

    def later(seconds: float) -> None:
        now[0] += seconds

    try:
        with pytest.raises(RepoLocked) as info:
            RepoLock(path, sleep=later, clock=lambda: now[0]).acquire()
    finally:
        let_go(holder)
    assert f"pid {gone}" in info.value.message and "fuser" in info.value.message
    assert info.value.data["pid"] == gone and now[0] >= LOCK_GRACE
