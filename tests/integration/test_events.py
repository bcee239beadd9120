"""The event stream: every change is an event, filters, resuming with since, slow subscribers."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import RequestFailed
from pokeralphd.settings import DaemonSettings
from tests.helpers import DaemonProcess, events_of, make_git_repo, read_messages, wait_until
from tests.inproc import ThreadedDaemon


def subscribe(daemon: DaemonProcess, **params: Any) -> tuple[socket.socket, dict[str, Any]]:
    sock = daemon.raw()
    sock.sendall(
        b'{"jsonrpc":"2.0","id":"sub","method":"events.subscribe","params":'
        + __import__("json").dumps(params).encode()
        + b"}\n"
    )
    reply = read_messages(sock, 1)[0]
    return sock, reply


def test_every_change_is_an_event(daemon: DaemonProcess, repo: Path) -> None:
    with daemon.connect() as watcher:
        watcher.call("events.subscribe", {})
        daemon.call("repo.register", {"path": str(repo)})
        created = daemon.call(
            "task.create",
            {"title": "A", "description": "d", "acceptanceCriteria": ["c"], "repo": str(repo)},
        )["task"]
        daemon.call("task.update", {"taskId": created["id"], "title": "B", "repo": str(repo)})
        daemon.call("config.update", {"patch": {"mode": "yolo"}, "repo": str(repo)})
        daemon.call("prd.update", {"description": "new", "repo": str(repo)})
        daemon.call("task.delete", {"taskId": created["id"], "repo": str(repo)})
        daemon.call("repo.unregister", {"repo": str(repo)})
        seen = list(events_of(watcher, lambda e: e["type"] == "repo_unregistered"))
    assert [e["type"] for e in seen] == [
        "repo_registered",
        "task_created",
        "task_updated",
        "config_updated",
        "prd_updated",
        "task_deleted",
        "repo_unregistered",
    ]
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e["repo"] == "repo" and e["timestamp"].endswith("Z") for e in seen)
    assert seen[2]["taskId"] == "001-a" and seen[2]["payload"]["task"]["title"] == "B"


def test_filters_by_repo_type_and_task(daemon: DaemonProcess, home: Path) -> None:
    a = make_git_repo(home / "a")
    b = make_git_repo(home / "b")
    daemon.call("repo.register", {"path": str(a)})
    daemon.call("repo.register", {"path": str(b)})
    with daemon.connect() as watcher:
        watcher.call("events.subscribe", {"repo": "b", "types": ["task_updated", "task_deleted"]})
        for repo in (a, b):
            daemon.call(
                "task.create",
                {"title": "T", "description": "d", "acceptanceCriteria": ["c"], "repo": str(repo)},
            )
            daemon.call("task.update", {"taskId": "001-t", "priority": 5, "repo": str(repo)})
        daemon.call("task.delete", {"taskId": "001-t", "repo": str(b)})
        seen = list(events_of(watcher, lambda e: e["type"] == "task_deleted"))
    assert [(e["repo"], e["type"]) for e in seen] == [("b", "task_updated"), ("b", "task_deleted")]


def test_resume_with_since_and_unsubscribe(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    first = daemon.call("daemon.status")["seq"]
    for i in range(3):
        daemon.call(
            "task.create",
            {"title": f"T{i}", "description": "d", "acceptanceCriteria": ["c"], "repo": str(repo)},
        )
    sock, reply = subscribe(daemon, since=first)
    with sock:
        assert reply["result"]["replayed"] == 3 and reply["result"]["lost"] == 0
        assert reply["result"]["epoch"] == daemon.call("daemon.status")["epoch"]
        replayed = read_messages(sock, 3)
        assert [m["params"]["seq"] for m in replayed] == [first + 1, first + 2, first + 3]
        sock.sendall(b'{"jsonrpc":"2.0","id":2,"method":"events.unsubscribe","params":{}}\n')
        assert read_messages(sock, 1)[0]["result"]["unsubscribed"] == [
            reply["result"]["subscription"]
        ]
        daemon.call(
            "task.create",
            {"title": "after", "description": "d", "acceptanceCriteria": ["c"], "repo": str(repo)},
        )
        sock.sendall(b'{"jsonrpc":"2.0","id":3,"method":"daemon.ping"}\n')
        assert read_messages(sock, 1)[0]["id"] == 3  # no event came before the ping reply
    with daemon.connect() as conn, pytest.raises(RequestFailed) as info:
        conn.call("events.unsubscribe", {"subscription": 999})
    assert info.value.code == -32015


def test_since_reports_lost_events(home: Path, repo: Path) -> None:
    daemon = ThreadedDaemon(home, DaemonSettings(event_history=100)).start()
    try:
        daemon.call("repo.register", {"path": str(repo)})
        with daemon.connect() as conn:
            for i in range(120):
                conn.call("prd.update", {"description": f"d{i}", "repo": str(repo)})
        sock, reply = subscribe(daemon, since=0)
        with sock:
            result = reply["result"]
            assert result["lost"] == 21 and result["replayed"] == 100 and result["oldestSeq"] == 22
    finally:
        daemon.stop()


def test_a_replay_sends_what_the_backlog_can_hold_and_the_rest_is_lost(
    home: Path, repo: Path
) -> None:
    """Resuming from far behind: the newest events a backlog can hold are replayed and
    the rest reported lost. Replaying the whole history overflowed the subscriber at
    once, so its every resumption was dropped again (a client behind a flood never
    caught up)."""
    backlog = 65536
    daemon = ThreadedDaemon(home, DaemonSettings(max_subscriber_backlog=backlog)).start()
    try:
        daemon.call("repo.register", {"path": str(repo)})
        big = "x" * 10_000
        with daemon.connect() as writer:
            for i in range(50):  # ~500 KB of history, eight backlogs' worth
                writer.call("prd.update", {"description": f"{i} {big}", "repo": str(repo)})
            sock, reply = subscribe(daemon, since=0, types=["prd_updated"])
            with sock:
                result = reply["result"]
                replayed, lost = result["replayed"], result["lost"]
                assert 1 <= replayed <= backlog // 2 // 10_000 and replayed + lost == 50
                assert result["oldestSeq"] == result["seq"] - replayed + 1
                messages = read_messages(sock, replayed)
                assert [m["params"]["payload"]["prd"]["description"].split()[0] for m in messages]
                assert messages[-1]["params"]["payload"]["prd"]["description"].startswith("49 ")
                # still subscribed: the next event comes, no overflow notice before it
                writer.call("prd.update", {"description": "after", "repo": str(repo)})
                [after] = read_messages(sock, 1)
                assert after["method"] == "event", after
                assert after["params"]["payload"]["prd"]["description"] == "after"
    finally:
        daemon.stop()


def test_stalled_subscriber_is_dropped_and_slows_nobody(home: Path, repo: Path) -> None:
    daemon = ThreadedDaemon(home, DaemonSettings(max_subscriber_backlog=65536)).start()
    try:
        daemon.call("repo.register", {"path": str(repo)})
        stalled = daemon.raw()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{}}\n')
        assert read_messages(stalled, 1)[0]["id"] == 1
        with daemon.connect() as watcher:
            watcher.call("events.subscribe", {"types": ["prd_updated"]})
            got: list[dict[str, Any]] = []
            reader = threading.Thread(
                target=lambda: got.extend(
                    events_of(
                        watcher, lambda e: e["payload"]["prd"]["description"].startswith("199")
                    )
                )
            )
            reader.start()
            big = "x" * 20_000
            with daemon.connect() as writer:
                for i in range(200):
                    writer.call("prd.update", {"description": f"{i}{big}", "repo": str(repo)})
            reader.join(30)
        assert len(got) == 200
        # The stalled one was told (the last message before EOF) and disconnected.
        stalled.settimeout(10)
        tail = b""
        while chunk := stalled.recv(1 << 16):
            tail = (tail + chunk)[-4096:]
        stalled.close()
        assert b'"events.overflow"' in tail
        wait_until(lambda: daemon.call("daemon.status")["clients"] == 1, 10, "only our client left")
    finally:
        daemon.stop()
