"""The inbox through the socket: schemas enforced, blocking waits, restarts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import RequestFailed
from tests.helpers import DaemonProcess, events_of
from tests.inproc import ThreadedDaemon


def create(daemon: DaemonProcess, repo: Path, **params: Any) -> dict[str, Any]:
    params.setdefault("title", "Choose a deploy target")
    delivery: dict[str, Any] = daemon.call("inbox.create", {"repo": str(repo), **params})[
        "delivery"
    ]
    return delivery


def test_create_answer_annotate_and_list(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    with daemon.connect() as watcher:
        watcher.call(
            "events.subscribe", {"types": ["new_delivery", "feedback_received", "annotation_added"]}
        )
        d = create(
            daemon,
            repo,
            body="Build is ready.",
            schema={"type": "select", "options": ["staging", "production"]},
        )
        assert (
            d["id"].startswith("d_")
            and d["status"] == "awaiting_feedback"
            and d["mode"] == "interactive"
        )
        with pytest.raises(RequestFailed) as info:
            daemon.call("inbox.answer", {"id": d["id"], "values": {"value": "prod"}})
        assert info.value.code == -32020 and info.value.data["field"] == "value"
        assert daemon.call("inbox.get", {"id": d["id"]})["feedback"] == []
        daemon.call(
            "inbox.annotate",
            {
                "id": d["id"],
                "content": "prefer staging first",
                "target": {"type": "line", "line": 1},
            },
        )
        daemon.call(
            "inbox.answer", {"id": d["id"], "values": {"value": "staging"}, "note": "then prod"}
        )
        seen = list(events_of(watcher, lambda e: e["type"] == "feedback_received"))
    assert [e["type"] for e in seen] == ["new_delivery", "annotation_added", "feedback_received"]
    full = daemon.call("inbox.get", {"id": d["id"]})
    assert full["delivery"]["status"] == "completed" and full["delivery"]["completedAt"]
    assert (
        full["feedback"][0]["values"] == {"value": "staging"}
        and full["feedback"][0]["note"] == "then prod"
    )
    assert full["annotations"][0]["content"] == "prefer staging first"
    with pytest.raises(RequestFailed) as info:
        daemon.call("inbox.answer", {"id": d["id"], "values": {"value": "staging"}})
    assert info.value.code == -32016
    passive = create(daemon, repo, mode="passive", title="FYI", body="done")
    assert passive["status"] == "delivered"
    listed = daemon.call("inbox.list", {"status": "open"})["items"]
    assert listed == []
    assert {i["id"] for i in daemon.call("inbox.list")["items"]} == {d["id"], passive["id"]}


def test_bad_input_is_refused(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    for params, field in (
        ({"schema": {"type": "rating", "max": 0}}, "schema.max"),
        ({"schema": {"type": "nope"}}, None),
        ({"mode": "passive", "schema": {"type": "confirm"}}, None),
        ({"mode": "blocking"}, None),
        ({"title": ""}, "title"),
    ):
        with pytest.raises(RequestFailed) as info:
            create(daemon, repo, **params)
        assert info.value.code == -32602
        if field:
            assert info.value.data["field"] == field
    for bad in ("../etc", "d_1", "x_1_001"):
        with pytest.raises(RequestFailed) as info:
            daemon.call("inbox.get", {"id": bad})
        assert info.value.code == -32602
    with pytest.raises(RequestFailed) as info:
        daemon.call("inbox.get", {"id": "d_1_001"})
    assert info.value.code == -32019


def test_blocking_wait_times_out_and_is_answered_later(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    d = create(daemon, repo, mode="blocking", schema={"type": "confirm"})
    with daemon.connect() as watcher:
        watcher.call("events.subscribe", {"types": ["delivery_timeout"]})
        assert daemon.call("inbox.wait", {"id": d["id"], "timeout": 0.02})["status"] == "timeout"
        list(events_of(watcher, lambda e: e["type"] == "delivery_timeout"))
    assert daemon.call("inbox.get", {"id": d["id"]})["delivery"]["status"] == "timeout"
    results: list[Any] = []
    waiter = threading.Thread(
        target=lambda: results.append(daemon.call("inbox.wait", {"id": d["id"], "timeout": 30}))
    )
    with daemon.connect() as watcher:
        watcher.call("events.subscribe", {"types": ["feedback_received"]})
        waiter.start()
        # The waiting connection does not hold the daemon up: others are served meanwhile.
        assert daemon.call("daemon.ping") == "pong"
        daemon.call("inbox.answer", {"id": d["id"], "values": {"value": True}})
        list(events_of(watcher, lambda e: e["type"] == "feedback_received"))
    waiter.join(30)
    assert results[0]["status"] == "answered" and results[0]["answer"]["values"] == {"value": True}
    assert daemon.call("inbox.get", {"id": d["id"]})["delivery"]["status"] == "completed"


def test_one_connection_waits_while_it_asks_other_things(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    d = create(daemon, repo, mode="blocking", schema={"type": "rating"})
    with daemon.raw() as sock:
        sock.sendall(
            b'{"jsonrpc":"2.0","id":"w","method":"inbox.wait","params":{"id":"'
            + d["id"].encode()
            + b'"}}\n'
            b'{"jsonrpc":"2.0","id":"p","method":"daemon.ping"}\n'
        )
        from tests.helpers import read_messages

        assert read_messages(sock, 1)[0]["id"] == "p"
        daemon.call("inbox.answer", {"id": d["id"], "values": {"value": 4}})
        reply = read_messages(sock, 1)[0]
    assert reply["id"] == "w" and reply["result"]["answer"]["values"] == {"value": 4}


def test_inbox_files_survive_a_restart(home: Path, repo: Path) -> None:
    first = ThreadedDaemon(home).start()
    first.call("repo.register", {"path": str(repo)})
    d = create(
        first,
        repo,
        mode="blocking",
        schema={"type": "form", "fields": [{"name": "env", "type": "text", "required": True}]},
    )
    first.call("inbox.annotate", {"id": d["id"], "content": "note"})
    first.stop()
    second = ThreadedDaemon(home).start()
    try:
        got = second.call("inbox.get", {"id": d["id"]})
        assert (
            got["delivery"]["status"] == "awaiting_feedback"
            and got["annotations"][0]["content"] == "note"
        )
        second.call("inbox.answer", {"id": d["id"], "values": {"values": {"env": "staging"}}})
        assert second.call("inbox.wait", {"id": d["id"], "timeout": 1})["answer"]["values"] == {
            "values": {"env": "staging"}
        }
        folder = repo / ".pokeralph" / "inbox" / "deliveries" / d["id"]
        assert {p.name for p in folder.iterdir()} == {
            "delivery.json",
            "feedback.json",
            "annotations.json",
        }
        assert (repo / ".pokeralph" / "inbox" / "index.json").is_file()
    finally:
        second.stop()
