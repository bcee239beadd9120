"""Writes under contention, end to end: many writers at once lose nothing, get strictly
increasing versions and clean conflicts, events carry the versions in order; a kill -9
in the middle of 50 writers loses no acknowledged write; a PRD edited or broken by hand
while the daemon holds it in memory is read again, or named and left alone."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphctl.client import RequestFailed
from pokeralphd.protocol.codes import ErrorCode
from tests.helpers import DaemonProcess, make_git_repo
from tests.inproc import RpcError, running_daemon

WRITERS = 50
KILL_AFTER = 400  # acknowledged writes before the kill
CLOSED = "the daemon closed the connection before answering"


def _task(title: str) -> dict[str, Any]:
    return {"title": title, "description": "d", "acceptanceCriteria": ["c"]}


def test_kill_9_under_50_writers_loses_no_acknowledged_write(home: Path, repo: Path) -> None:
    first = DaemonProcess(home).start()
    first.call("repo.register", {"path": str(repo)})
    ids = [
        first.call("task.create", {"repo": str(repo), **_task(f"Writer {i}")})["task"]["id"]
        for i in range(WRITERS)
    ]
    # per writer: (n, version) of every acknowledged write; the last n it sent
    acked: list[list[tuple[int, int]]] = [[] for _ in range(WRITERS)]
    sent = [0] * WRITERS
    unexpected: list[BaseException] = []
    killed = threading.Event()
    count = threading.Lock()
    total = [0]
    assert first.proc is not None
    pid = first.proc.pid

    def acknowledged(i: int, version: int) -> None:
        acked[i].append((sent[i], version))
        with count:
            total[0] += 1
            if total[0] == KILL_AFTER:
                # at once, from the thread that got the answer: a write acknowledged a
                # moment ago and not yet on disk would be caught here
                killed.set()
                os.kill(pid, signal.SIGKILL)

    def writer(i: int) -> None:
        try:
            with first.connect(timeout=60) as conn:
                while True:
                    sent[i] += 1
                    params = {"repo": str(repo), "taskId": ids[i], "description": f"n{sent[i]}"}
                    acknowledged(i, conn.call("task.update", params)["version"])
        except RequestFailed as exc:
            if not (killed.is_set() and exc.message == CLOSED):
                unexpected.append(exc)
        except OSError as exc:  # reset or broken pipe: the daemon is gone
            if not killed.is_set():
                unexpected.append(exc)

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()
    first.kill9()  # reaps it
    assert killed.is_set() and unexpected == []

    versions = [v for writes in acked for _, v in writes]
    assert len(versions) >= KILL_AFTER
    assert len(set(versions)) == len(versions)  # each acknowledged write has its own version
    for writes in acked:
        assert [v for _, v in writes] == sorted({v for _, v in writes})  # strictly increasing
    second = DaemonProcess(home).start()
    try:
        got = second.call("prd.get", {"repo": str(repo)})
        assert got["version"] >= max(versions)
        on_disk = {t["id"]: t["description"] for t in got["prd"]["tasks"]}
        for i, writes in enumerate(acked):
            n = int(on_disk[ids[i]].removeprefix("n")) if on_disk[ids[i]] != "d" else 0
            last_acked = writes[-1][0] if writes else 0
            # its last acknowledged write is there, or one sent after it (never answered)
            assert last_acked <= n <= sent[i], (i, last_acked, n, sent[i])
        leftovers = [p.name for p in (repo / ".pokeralph").iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        after = second.call("task.update", {"repo": str(repo), "taskId": ids[0], "title": "x"})
        assert after["version"] == got["version"] + 1
    finally:
        second.stop()


@pytest.mark.anyio
async def test_many_writers_get_every_version_once_and_events_in_order(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        ids = [
            (await d.call("task.create", {"repo": str(repo), **_task(f"W{i}")}))["task"]["id"]
            for i in range(20)
        ]
        acked: list[int] = []
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo), "types": ["task_updated"]})

            async def writer(task_id: str) -> None:
                async with d.client() as client:
                    for n in range(10):
                        result = await client.call(
                            "task.update",
                            {"repo": str(repo), "taskId": task_id, "description": f"n{n}"},
                        )
                        acked.append(result["version"])

            async with anyio.create_task_group() as tg:
                for task_id in ids:
                    tg.start_soon(writer, task_id)
            events = [await watcher.next_event() for _ in range(len(acked))]
        assert sorted(acked) == list(range(21, 221))  # 20 creates, then 200 updates
        assert [e["payload"]["version"] for e in events] == list(range(21, 221))
        prd = json.loads((repo / ".pokeralph" / "prd.json").read_text())
        assert prd["version"] == 220
        assert {t["description"] for t in prd["tasks"]} == {"n9"}


@pytest.mark.anyio
async def test_writers_naming_the_same_version_get_one_success(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        created = await d.call("task.create", {"repo": str(repo), **_task("A")})
        version = created["version"]
        outcomes: list[Any] = []

        async def update(n: int) -> None:
            try:
                outcomes.append(
                    await d.call(
                        "task.update",
                        {
                            "repo": str(repo),
                            "taskId": created["task"]["id"],
                            "title": f"by {n}",
                            "expectedVersion": version,
                        },
                    )
                )
            except RpcError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            for n in range(10):
                tg.start_soon(update, n)
        won = [o for o in outcomes if isinstance(o, dict)]
        lost = [o for o in outcomes if isinstance(o, RpcError)]
        assert len(won) == 1 and won[0]["version"] == version + 1
        assert len(lost) == 9
        for exc in lost:
            assert exc.code == int(ErrorCode.VERSION_CONFLICT)
            assert exc.data["expected"] == version and exc.data["actual"] == version + 1
        task = await d.call("task.get", {"repo": str(repo), "taskId": created["task"]["id"]})
        assert task["task"]["title"] == won[0]["task"]["title"] and task["version"] == version + 1


@pytest.mark.anyio
async def test_a_prd_edited_or_broken_by_hand_while_held_in_memory(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    path = repo / ".pokeralph" / "prd.json"
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        await d.call("task.create", {"repo": str(repo), **_task("A")})  # held in memory now
        edited = json.loads(path.read_text())
        edited["name"], edited["version"] = "Edited", 40
        path.write_text(json.dumps(edited))
        got = await d.call("prd.get", {"repo": str(repo)})
        assert got["prd"]["name"] == "Edited" and got["version"] == 40
        created = await d.call("task.create", {"repo": str(repo), **_task("B")})
        assert created["version"] == 41
        on_disk = json.loads(path.read_text())
        assert on_disk["name"] == "Edited" and len(on_disk["tasks"]) == 2

        broken = path.read_text().replace('"title": "A"', '"title": ""')
        path.write_text(broken)
        for method, params in (
            ("task.create", _task("C")),
            ("task.list", {}),
            ("prd.update", {"name": "N"}),
        ):
            with pytest.raises(RpcError) as info:
                await d.call(method, {"repo": str(repo), **params})
            assert info.value.code == int(ErrorCode.CORRUPT_FILE)
            assert info.value.data["file"] == str(path)
            assert info.value.data["field"] == "tasks[0].title"
        assert path.read_text() == broken
