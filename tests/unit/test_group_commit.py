"""Group commit: the mechanism (ordering, coalescing, errors, cancellation), the document
kept in memory (versions, conflicts, failed writes, files changed behind our back), the
encoder that reuses unchanged tasks' bytes, and the PRD path of the repository store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralph_core import documents
from pokeralph_core.documents import encode_document, encode_with_fragments
from pokeralph_core.timeutil import utcnow
from pokeralphd.domain.models import PRD, Battle, PRDMetadata, Progress, Task
from pokeralphd.domain.registry import RepoEntry
from pokeralphd.domain.statuses import BattleStatus
from pokeralphd.errors import (
    CorruptFile,
    InvalidParams,
    StorageError,
    TaskNotFound,
    VersionConflict,
)
from pokeralphd.protocol import events as ev
from pokeralphd.store import commit
from pokeralphd.store.commit import DocumentFile, GroupCommit, Request
from pokeralphd.store.filemanager import HISTORY_KIND, PRD_KIND, FileManager
from pokeralphd.store.repo_store import RepoStore

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------------- mechanism


class Recorder:
    """A commit function that records its batches and can be held or made to fail."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.hold: anyio.Event | None = None
        self.entered = anyio.Event()
        self.fail_batch: int | None = None  # index of the batch that raises
        self.done: list[int] = []  # payloads whose write completed

    async def __call__(self, batch: list[Request[int, str]]) -> None:
        self.batches.append([r.payload for r in batch])
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_batch == len(self.batches) - 1:
            raise StorageError("disk full")
        self.done += [r.payload for r in batch]
        for request in batch:
            request.resolve(f"ok {request.payload}")


async def test_changes_arriving_during_a_write_share_the_next_one() -> None:
    rec = Recorder()
    rec.hold = anyio.Event()
    group: GroupCommit[int, str] = GroupCommit(rec)
    results: dict[int, str] = {}

    async def submit(n: int) -> None:
        results[n] = await group.submit(n)

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, 0)
        await rec.entered.wait()  # the first write is in flight
        for n in range(1, 6):
            tg.start_soon(submit, n)
        await anyio.wait_all_tasks_blocked()
        assert results == {}  # nobody is answered before a write holding its change ends
        rec.hold.set()
    assert rec.batches == [[0], [1, 2, 3, 4, 5]]  # in the order they arrived
    assert results == {n: f"ok {n}" for n in range(6)}
    assert group.batches == 2 and not group.busy


async def test_an_acknowledgement_waits_for_its_own_write() -> None:
    rec = Recorder()
    group: GroupCommit[int, str] = GroupCommit(rec)
    seen: list[tuple[int, list[int]]] = []

    async def submit(n: int) -> None:
        await group.submit(n)
        seen.append((n, list(rec.done)))

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(submit, n)
    for n, done in seen:
        assert n in done


async def test_a_failed_write_fails_every_change_it_carried_and_no_other() -> None:
    rec = Recorder()
    rec.hold = anyio.Event()
    rec.fail_batch = 1
    group: GroupCommit[int, str] = GroupCommit(rec)
    outcomes: dict[int, Any] = {}

    async def submit(n: int) -> None:
        try:
            outcomes[n] = await group.submit(n)
        except StorageError as exc:
            outcomes[n] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, 0)
        await rec.entered.wait()
        for n in (1, 2, 3):
            tg.start_soon(submit, n)
        await anyio.wait_all_tasks_blocked()
        rec.hold.set()
        rec.hold = None
    async with anyio.create_task_group() as tg:  # the next write goes on as usual
        tg.start_soon(submit, 4)
    assert rec.batches == [[0], [1, 2, 3], [4]]
    assert outcomes[0] == "ok 0" and outcomes[4] == "ok 4"
    for n in (1, 2, 3):
        assert isinstance(outcomes[n], StorageError) and outcomes[n].message == "disk full"


async def test_a_change_the_commit_leaves_unsettled_is_an_error_not_a_hang() -> None:
    async def forgetful(batch: list[Request[int, str]]) -> None:
        await anyio.lowlevel.checkpoint()  # the others queue meanwhile
        batch[0].resolve("only the first")

    group: GroupCommit[int, str] = GroupCommit(forgetful)
    outcomes: list[Any] = []

    async def submit(n: int) -> None:
        try:
            outcomes.append(await group.submit(n))
        except RuntimeError as exc:
            outcomes.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(submit, 0)
            tg.start_soon(submit, 1)
            tg.start_soon(submit, 2)
    assert outcomes[:2] == ["only the first", "only the first"]  # batches [0] and [1, 2]
    assert isinstance(outcomes[2], RuntimeError)


async def test_a_cancelled_caller_still_has_its_change_written_and_leads_on() -> None:
    rec = Recorder()
    rec.hold = anyio.Event()
    group: GroupCommit[int, str] = GroupCommit(rec)
    after: list[str] = []

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as leader_scope:
            tg.start_soon(group.submit, 0)
            await rec.entered.wait()

            async def cancelled_follower() -> None:
                with anyio.CancelScope() as scope:
                    scope.cancel()  # its caller went away: the change is still written
                    await group.submit(1)

            tg.start_soon(cancelled_follower)
            await anyio.wait_all_tasks_blocked()
        leader_scope.cancel()
        rec.hold.set()

        async def later() -> None:
            after.append(await group.submit(2))

        tg.start_soon(later)
    assert rec.done == [0, 1, 2] and after == ["ok 2"]


# ---------------------------------------------------------------------------- documents


def _prd(*titles: str) -> PRD:
    return PRD(
        name="p",
        description="d",
        tasks=[
            Task(id=f"{i + 1:03d}-t", title=t, description="d", acceptance_criteria=["c"])
            for i, t in enumerate(titles)
        ],
    )


def _add(title: str) -> Any:
    def change(prd: PRD | None) -> PRD:
        base = prd if prd is not None else _prd()
        task = Task(
            id=f"{len(base.tasks) + 1:03d}-t",
            title=title,
            description="d",
            acceptance_criteria=["c"],
        )
        return base.model_copy(update={"tasks": [*base.tasks, task]})

    return change


@pytest.fixture
def prd_file(tmp_path: Path) -> DocumentFile[PRD]:
    fm = FileManager(tmp_path)
    fm.init()
    return DocumentFile(PRD_KIND, fm.prd_path, fragments_of="tasks")


def _on_disk(doc: DocumentFile[Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(doc.path.read_text())
    return data


async def test_each_change_gets_its_own_version_and_they_share_writes(
    prd_file: DocumentFile[PRD],
) -> None:
    versions: dict[str, int] = {}

    async def add(title: str) -> None:
        _, versions[title] = await prd_file.update(_add(title))

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(add, f"T{n}")
    assert sorted(versions.values()) == list(range(1, 21))
    # the first alone, the 19 that arrived meanwhile in one more write
    assert prd_file.writes == 2 and prd_file.batches == 2
    disk = _on_disk(prd_file)
    assert disk["version"] == 20
    # applied in the order they arrived, each on top of the one before
    assert [t["title"] for t in disk["tasks"]] == [f"T{n}" for n in range(20)]
    assert versions == {f"T{n}": n + 1 for n in range(20)}


async def test_a_stale_expected_version_fails_that_change_alone(
    prd_file: DocumentFile[PRD],
) -> None:
    await prd_file.update(_add("base"))  # version 1
    outcomes: dict[str, Any] = {}

    async def update(name: str, expected: int | None) -> None:
        try:
            outcomes[name] = (await prd_file.update(_add(name), expected))[1]
        except VersionConflict as exc:
            outcomes[name] = exc

    async with anyio.create_task_group() as tg:  # one batch: all arrive together
        tg.start_soon(update, "first", 1)  # 1 -> 2
        tg.start_soon(update, "stale", 1)  # the file is at 2 by its turn
        tg.start_soon(update, "next", 2)  # right: it read what "first" wrote
        tg.start_soon(update, "any", None)
    assert outcomes["first"] == 2 and outcomes["next"] == 3 and outcomes["any"] == 4
    stale = outcomes["stale"]
    assert isinstance(stale, VersionConflict)
    assert stale.data == {"file": str(prd_file.path), "expected": 1, "actual": 2}
    disk = _on_disk(prd_file)
    assert disk["version"] == 4
    assert [t["title"] for t in disk["tasks"]] == ["base", "first", "next", "any"]


async def test_a_failing_change_fails_alone(prd_file: DocumentFile[PRD]) -> None:
    def broken(_prd: PRD | None) -> PRD:
        raise TaskNotFound("009-x", "r")

    outcomes: list[Any] = []

    async def update(change: Any) -> None:
        try:
            outcomes.append((await prd_file.update(change))[1])
        except TaskNotFound as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(update, _add("a"))
        tg.start_soon(update, broken)
        tg.start_soon(update, _add("b"))
    assert outcomes[0] == 1 and isinstance(outcomes[1], TaskNotFound) and outcomes[2] == 2
    assert [t["title"] for t in _on_disk(prd_file)["tasks"]] == ["a", "b"]


async def test_a_failed_write_fails_its_batch_and_keeps_file_and_version(
    prd_file: DocumentFile[PRD], monkeypatch: pytest.MonkeyPatch
) -> None:
    await prd_file.update(_add("kept"), None)
    before = prd_file.path.read_bytes()

    def full_disk(path: Path, data: bytes, mode: int = 0o644) -> None:
        raise StorageError(f"no space left on the device holding {path}", file=str(path))

    monkeypatch.setattr(commit, "atomic_write", full_disk)
    outcomes: dict[str, Any] = {}

    async def update(name: str, expected: int | None) -> None:
        try:
            outcomes[name] = await prd_file.update(_add(name), expected)
        except (StorageError, VersionConflict) as exc:
            outcomes[name] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(update, "a", None)
        tg.start_soon(update, "stale", 0)
        tg.start_soon(update, "b", None)
    assert isinstance(outcomes["a"], StorageError) and isinstance(outcomes["b"], StorageError)
    assert isinstance(outcomes["stale"], VersionConflict)  # its own error, not the disk's
    assert prd_file.path.read_bytes() == before
    monkeypatch.undo()  # the disk has room again
    value, version = await prd_file.update(_add("after"))
    assert version == 2 and [t.title for t in value.tasks] == ["kept", "after"]


async def test_events_go_out_after_the_durable_write_in_version_order(
    prd_file: DocumentFile[PRD],
) -> None:
    published: list[tuple[int, int]] = []  # (version of the change, version on disk then)

    def on_durable(_value: PRD, version: int) -> None:
        published.append((version, _on_disk(prd_file)["version"]))

    async with anyio.create_task_group() as tg:
        for n in range(10):
            tg.start_soon(prd_file.update, _add(f"T{n}"), None, on_durable)
    assert [v for v, _ in published] == list(range(1, 11))
    assert all(disk >= version for version, disk in published)


async def test_writes_do_not_read_the_file_again(
    prd_file: DocumentFile[PRD], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Path] = []
    real = documents.read_json_stat

    def counting(path: Path) -> Any:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(documents, "read_json_stat", counting)
    for n in range(5):
        await prd_file.update(_add(f"T{n}"))
        assert (await anyio.to_thread.run_sync(prd_file.current)).version == n + 1
    assert len(reads) == 1  # the first look, finding no file


async def test_a_file_changed_behind_our_back_is_read_again(
    prd_file: DocumentFile[PRD],
) -> None:
    await prd_file.update(_add("ours"))
    edited = _on_disk(prd_file)
    edited["version"] = 41
    edited["tasks"][0]["title"] = "edited by hand"
    prd_file.path.write_text(json.dumps(edited))  # in place: same inode
    current = await anyio.to_thread.run_sync(prd_file.current)
    assert current.version == 41 and current.value is not None
    assert current.value.tasks[0].title == "edited by hand"
    value, version = await prd_file.update(_add("next"))
    assert version == 42 and [t.title for t in value.tasks] == ["edited by hand", "next"]
    # replaced by another file (an editor's rename, a git checkout)
    other = prd_file.path.with_name("other.json")
    other.write_text(json.dumps({**_on_disk(prd_file), "version": 7, "name": "renamed"}))
    os.replace(other, prd_file.path)
    value, version = await prd_file.update(_add("third"))
    assert version == 8 and value.name == "renamed"
    prd_file.path.unlink()  # removed by hand: a new file, as before
    _, version = await prd_file.update(_add("fresh"))
    assert version == 1


async def test_a_file_broken_by_hand_is_named_and_never_overwritten(
    prd_file: DocumentFile[PRD],
) -> None:
    await prd_file.update(_add("ours"))  # in memory now
    broken = '{"name": "p", "description": "d", "tasks": [{"id": "../x"}]}'
    prd_file.path.write_text(broken)
    for _ in range(2):
        with pytest.raises(CorruptFile) as info:
            await prd_file.update(_add("more"))
        assert info.value.data["file"] == str(prd_file.path)
        assert info.value.data["field"] == "tasks[0].id"
        with pytest.raises(CorruptFile):
            await anyio.to_thread.run_sync(prd_file.current)
    assert prd_file.path.read_text() == broken
    # a link planted there is refused, not read or written through
    outside = prd_file.path.parent.parent / "outside.json"
    outside.write_text(
        json.dumps({"schemaVersion": 1, "version": 3, "name": "x", "description": "d"})
    )
    prd_file.path.unlink()
    prd_file.path.symlink_to(outside)
    with pytest.raises(StorageError):
        await prd_file.update(_add("more"))
    assert prd_file.path.is_symlink() and json.loads(outside.read_text())["version"] == 3


async def test_saving_what_the_file_holds_writes_nothing(tmp_path: Path) -> None:
    fm = FileManager(tmp_path)
    fm.create_battle_folder("001-a")
    history = DocumentFile(HISTORY_KIND, fm.history_path("001-a"))
    battle = Battle(task_id="001-a", status=BattleStatus.RUNNING, started_at=utcnow())
    assert await history.save(battle) == 1
    inode = fm.history_path("001-a").stat().st_ino
    assert await history.save(battle) == 1  # the same record: no write
    assert history.writes == 1 and fm.history_path("001-a").stat().st_ino == inode
    battle.cost_usd = 0.5
    assert await history.save(battle) == 2
    assert history.writes == 2 and _on_disk(history)["costUsd"] == 0.5
    # a value saved is a snapshot: changing it afterwards changes nothing written
    battle.cost_usd = 0.75
    assert _on_disk(history)["costUsd"] == 0.5
    loaded = fm.load_history("001-a")
    assert loaded is not None and loaded.version == 2
    # a fresh start (a restarted daemon) compares with what the file holds
    again = DocumentFile(HISTORY_KIND, fm.history_path("001-a"))
    battle.cost_usd = 0.5
    assert await again.save(battle) == 2 and again.writes == 0


# ---------------------------------------------------------------------------- encoding


def _task(n: int, **fields: Any) -> Task:
    data: dict[str, Any] = {
        "id": f"{n:03d}-t",
        "title": f"T{n}",
        "description": "d",
        "acceptanceCriteria": ["c"],
    }
    data.update(fields)
    return Task.model_validate(data)


@pytest.mark.parametrize(
    "prd",
    [
        PRD(name="empty", description="no tasks"),
        PRD(
            name='Ünïcode "quoted" \\ ☃',
            description="line\nbreak\ttab \u2028 \x00 \U0001f600",
            tasks=[
                _task(1, description='ü\n"x"', acceptanceCriteria=["a", "b\nc"]),
                _task(2, priority=7),
            ],
            metadata=PRDMetadata(version="1.0.0", generated_by="x"),
        ),
    ],
)
def test_the_fragment_encoder_writes_the_very_bytes_of_encode_document(prd: PRD) -> None:
    expected = encode_document(PRD_KIND, prd, 12)
    data, fragments = encode_with_fragments(PRD_KIND, prd, 12, "tasks", {})
    assert data == expected
    again, _ = encode_with_fragments(PRD_KIND, prd, 12, "tasks", fragments)
    assert again == expected
    assert documents.decode_document(PRD_KIND, Path("x"), json.loads(data)).value == prd


def test_the_fragment_encoder_reuses_only_the_same_objects() -> None:
    prd = PRD(name="p", description="d", tasks=[_task(n) for n in range(1, 6)])
    _, fragments = encode_with_fragments(PRD_KIND, prd, 1, "tasks", {})
    changed = prd.model_copy(
        update={"tasks": [*prd.tasks[:2], _task(3, title="new"), *prd.tasks[3:], _task(6)]}
    )
    data, fresh = encode_with_fragments(PRD_KIND, changed, 2, "tasks", fragments)
    assert data == encode_document(PRD_KIND, changed, 2)
    for task in (prd.tasks[0], prd.tasks[1], prd.tasks[3]):
        assert fresh[id(task)][1] is fragments[id(task)][1]  # reused, not encoded again
    assert id(prd.tasks[2]) not in fresh


# ---------------------------------------------------------------------------- the store


class Sink:
    def __init__(self) -> None:
        self.events: list[ev.Payload] = []

    def publish(self, payload: ev.Payload, repo: str | None, task_id: str | None = None) -> None:
        self.events.append(payload)


@pytest.fixture
def store(tmp_path: Path) -> RepoStore:
    repo = tmp_path / "repo"
    repo.mkdir()
    s = RepoStore(RepoEntry(name="r", path=str(repo)), Sink(), tmp_path / "user.json")
    s.open()
    return s


def _fields(title: str) -> dict[str, Any]:
    return {"title": title, "description": "d", "acceptanceCriteria": ["c"]}


async def test_store_changes_are_validated_and_name_the_field(store: RepoStore) -> None:
    await store.create_task(_fields("A"), None, None)

    def duplicate(prd: PRD) -> PRD:
        prd.tasks.append(prd.tasks[0].model_copy())
        return prd

    with pytest.raises(InvalidParams) as info:
        await store.update_prd(duplicate, None)
    assert info.value.data["field"] == "tasks" and "duplicate task id" in info.value.message

    def unvalidated(prd: PRD) -> PRD:  # a task built without validation is checked
        prd.tasks.append(prd.tasks[0].model_copy(update={"id": "002-b", "title": ""}))
        return prd

    with pytest.raises(InvalidParams) as info:
        await store.update_prd(unvalidated, None)
    assert info.value.data["field"] == "tasks[1].title"
    with pytest.raises(InvalidParams) as info:
        await store.replace_prd({"name": "n", "description": "d", "tasks": [{"id": "x"}]}, None)
    assert info.value.data["field"].startswith("prd.tasks[0]")
    prd, version = await store.prd()
    assert version == 1 and prd is not None and [t.id for t in prd.tasks] == ["001-a"]


async def test_what_readers_get_cannot_change_what_is_stored(store: RepoStore) -> None:
    await store.create_task(_fields("A"), None, None)
    prd, _ = await store.prd()
    assert prd is not None
    prd.tasks.clear()
    prd.name = "changed"
    task, _ = await store.task("001-a")
    task.title = "changed"
    again, _ = await store.prd()
    assert again is not None and again.name == "r" and again.tasks[0].title == "A"


async def test_store_events_carry_the_version_in_order(store: RepoStore) -> None:
    sink = store._events
    assert isinstance(sink, Sink)
    async with anyio.create_task_group() as tg:
        for n in range(12):
            tg.start_soon(store.create_task, _fields(f"T{n}"), None, None)
    created = [p for p in sink.events if isinstance(p, ev.TaskCreated)]
    assert [p.version for p in created] == list(range(1, 13))
    ids = [p.task["id"] for p in created]
    assert len(set(ids)) == 12
    prd, version = await store.prd()
    assert version == 12 and prd is not None and [t.id for t in prd.tasks] == ids


async def test_task_numbers_go_on_past_999_in_numeric_order(store: RepoStore) -> None:
    await store.create_task(_fields("A"), "999-last", None)
    task, _ = await store.create_task(_fields("B"), None, None)
    assert task.id.startswith("1000-")
    # "999-…" sorts after "1000-…" as text: the next number must still be 1001
    task, _ = await store.create_task(_fields("C"), None, None)
    assert task.id.startswith("1001-")


async def test_progress_ticks_leave_history_alone(store: RepoStore) -> None:
    store.files.create_battle_folder("001-a")
    files = store.battle_files("001-a")
    battle = Battle(task_id="001-a", status=BattleStatus.RUNNING, started_at=utcnow())
    progress = Progress(task_id="001-a")
    await files.history.save(battle)
    for n in range(3):
        progress.last_output = f"tick {n}"
        assert await files.progress.save(progress) == n + 1
        assert await files.history.save(battle) == 1
    assert files.history.writes == 1 and files.progress.writes == 3
    assert store.battle_files("001-a") is files
    store.forget_battle_files("001-a")
    assert store.battle_files("001-a") is not files


async def test_new_task_numbers_pass_the_battle_folders_left_behind(store: RepoStore) -> None:
    await store.create_task(_fields("A"), None, None)
    store.files.create_battle_folder("007-deleted-long-ago")  # its task is gone, not its files
    async with anyio.create_task_group() as tg:  # one write carries them all
        for n in range(5):
            tg.start_soon(store.create_task, _fields(f"T{n}"), None, None)
    prd, _ = await store.prd()
    assert prd is not None
    assert sorted(t.id[:3] for t in prd.tasks) == ["001", "008", "009", "010", "011", "012"]
    store.files.create_battle_folder("020-another")
    task, _ = await store.create_task(_fields("Z"), None, None)
    assert task.id == "021-z"


@pytest.mark.parametrize(
    "how",
    ["append", "insert", "extend", "iadd", "setitem", "slice", "assign", "new_prd"],
)
async def test_every_way_of_putting_a_task_in_is_validated(store: RepoStore, how: str) -> None:
    await store.create_task(_fields("A"), None, None)

    def change(prd: PRD) -> PRD:
        bad = prd.tasks[0].model_copy(update={"id": "002-b", "title": ""})  # not validated
        match how:
            case "append":
                prd.tasks.append(bad)
            case "insert":
                prd.tasks.insert(0, bad)
            case "extend":
                prd.tasks.extend([bad])
            case "iadd":
                prd.tasks += [bad]
            case "setitem":
                prd.tasks[0] = bad
            case "slice":
                prd.tasks[1:] = [bad]
            case "assign":
                prd.tasks = [*prd.tasks, bad]
            case "new_prd":
                return prd.model_copy(update={"tasks": [*prd.tasks, bad]})
        return prd

    with pytest.raises(InvalidParams) as info:
        await store.update_prd(change, None)
    assert info.value.data["field"].endswith("].title")

    def duplicate(prd: PRD) -> PRD:
        prd.tasks.extend(list(prd.tasks))  # nothing new, but every id twice
        return prd

    with pytest.raises(InvalidParams) as info:
        await store.update_prd(duplicate, None)
    assert info.value.data["field"] == "tasks"
    prd, version = await store.prd()
    assert version == 1 and prd is not None and [t.id for t in prd.tasks] == ["001-a"]


def test_documents_are_indented_as_the_standard_library_indents_them() -> None:
    """``documents.pretty`` writes ``json.dumps(indent=2, ensure_ascii=False)``'s bytes
    (but for a float's exponent), integers past 64 bits and text of any script included."""
    value = {
        "big": 2**70,
        "small": -(2**100),
        "text": 'é \u2028 "quoted" \\ \x01',
        "nested": [[], {}, {"a": [1, 2.5, None, True]}],
        "": "",
    }
    expected = json.dumps(value, indent=2, ensure_ascii=False).encode()
    assert documents.pretty(value) == expected
    assert json.loads(documents.pretty({"f": 1e16})) == {"f": 1e16}
