"""JSON-RPC 2.0 exactly as the specification says, through a real daemon's socket."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.helpers import DaemonProcess, read_messages


def send(sock: socket.socket, payload: bytes | str | dict[str, Any] | list[Any]) -> None:
    if isinstance(payload, dict | list):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    sock.sendall(payload + b"\n")


def ask(daemon: DaemonProcess, payload: Any) -> Any:
    with daemon.raw() as sock:
        send(sock, payload)
        return read_messages(sock, 1)[0]


def test_request_by_name_and_by_position(daemon: DaemonProcess, repo: Any) -> None:
    reply = ask(
        daemon,
        {"jsonrpc": "2.0", "id": 1, "method": "repo.register", "params": {"path": str(repo)}},
    )
    assert reply["id"] == 1 and reply["result"]["path"] == str(repo)
    reply = ask(
        daemon,
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "task.create",
            "params": ["T", "d", ["c"], None, None, None, str(repo)],
        },
    )
    assert reply["id"] == "a" and reply["result"]["task"]["id"] == "001-t"
    reply = ask(
        daemon, {"jsonrpc": "2.0", "id": 2, "method": "task.get", "params": ["001-t", str(repo)]}
    )
    assert reply["result"]["task"]["title"] == "T"


@pytest.mark.parametrize(
    ("payload", "code", "reply_id"),
    [
        ('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]', -32700, None),
        ('{"jsonrpc": "2.0", "method": 1, "params": "bar"}', -32600, None),
        ('{"method": "daemon.ping", "id": 1}', -32600, 1),
        ('{"jsonrpc": "1.0", "method": "daemon.ping", "id": 1}', -32600, 1),
        ('{"jsonrpc": "2.0", "method": "daemon.ping", "params": 3, "id": 1}', -32600, 1),
        ('{"jsonrpc": "2.0", "method": "daemon.ping", "id": {"a": 1}}', -32600, None),
        ('{"jsonrpc": "2.0", "method": "daemon.ping", "id": true}', -32600, None),
        ("[]", -32600, None),
        ('"just a string"', -32600, None),
        ("\xff\xfe", -32700, None),
    ],
)
def test_spec_errors_have_null_or_echoed_id(
    daemon: DaemonProcess, payload: str, code: int, reply_id: int | None
) -> None:
    reply = ask(daemon, payload.encode("latin-1"))
    assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == code
    assert reply["id"] == reply_id


def test_method_not_found_and_invalid_params(daemon: DaemonProcess) -> None:
    reply = ask(daemon, {"jsonrpc": "2.0", "id": 5, "method": "no.such"})
    assert reply == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {
            "code": -32601,
            "message": "Method not found",
            "data": {"method": "no.such", "hint": "call rpc.discover for the list of methods"},
        },
    }
    reply = ask(
        daemon, {"jsonrpc": "2.0", "id": 6, "method": "repo.register", "params": {"path": 5}}
    )
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "path"
    reply = ask(daemon, {"jsonrpc": "2.0", "id": 7, "method": "repo.register", "params": {}})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "path"
    reply = ask(daemon, {"jsonrpc": "2.0", "id": 8, "method": "daemon.ping", "params": [1]})
    assert reply["error"]["code"] == -32602
    reply = ask(daemon, {"jsonrpc": "2.0", "id": 9, "method": "daemon.ping", "params": {"x": 1}})
    assert reply["error"]["data"]["field"] == "x"


def test_batches_follow_the_spec(daemon: DaemonProcess) -> None:
    with daemon.raw() as sock:
        send(
            sock,
            """[
            {"jsonrpc": "2.0", "method": "daemon.ping", "id": "1"},
            {"jsonrpc": "2.0", "method": "daemon.ping"},
            {"jsonrpc": "2.0", "method": "task.list", "params": {"repo": "nope"}, "id": "2"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
            {"jsonrpc": "2.0", "method": "daemon.status", "id": "9"}
        ]""".replace("\n", ""),
        )
        replies = read_messages(sock, 1)[0]
    assert isinstance(replies, list) and len(replies) == 5
    by_id = {r["id"]: r for r in replies if r["id"] is not None}
    assert by_id["1"]["result"] == "pong"
    assert by_id["2"]["error"]["code"] == -32001
    assert by_id["5"]["error"]["code"] == -32601
    assert by_id["9"]["result"]["pid"] == daemon.pid
    assert [r["error"]["code"] for r in replies if r["id"] is None] == [-32600]


def test_invalid_batches(daemon: DaemonProcess) -> None:
    reply = ask(daemon, "[1]")
    assert reply == [{"jsonrpc": "2.0", "id": None, "error": reply[0]["error"]}]
    assert reply[0]["error"]["code"] == -32600
    assert [r["error"]["code"] for r in ask(daemon, "[1,2,3]")] == [-32600] * 3
    reply = ask(
        daemon,
        '[{"jsonrpc": "2.0", "method": "daemon.ping", "params": [1,2,4], "id": "1"}, {"jsonrpc": "2.0", "method"',
    )
    assert reply["error"]["code"] == -32700 and reply["id"] is None


def test_notifications_get_no_reply(daemon: DaemonProcess) -> None:
    with daemon.raw() as sock:
        send(sock, {"jsonrpc": "2.0", "method": "daemon.ping"})
        send(sock, {"jsonrpc": "2.0", "method": "no.such.method"})
        send(sock, {"jsonrpc": "2.0", "method": "repo.register", "params": {"path": 3}})
        send(
            sock,
            [
                {"jsonrpc": "2.0", "method": "daemon.ping"},
                {"jsonrpc": "2.0", "method": "daemon.ping"},
            ],
        )
        send(sock, {"jsonrpc": "2.0", "method": "daemon.ping", "id": "last"})
        assert read_messages(sock, 1) == [{"jsonrpc": "2.0", "id": "last", "result": "pong"}]


def test_null_id_is_a_request_not_a_notification(daemon: DaemonProcess) -> None:
    assert ask(daemon, {"jsonrpc": "2.0", "method": "daemon.ping", "id": None}) == {
        "jsonrpc": "2.0",
        "id": None,
        "result": "pong",
    }


def test_discover_lists_every_method_with_params(daemon: DaemonProcess) -> None:
    doc = ask(daemon, {"jsonrpc": "2.0", "id": 1, "method": "rpc.discover"})["result"]
    names = {m["name"] for m in doc["methods"]}
    for required in (
        "daemon.ping",
        "daemon.status",
        "daemon.shutdown",
        "repo.register",
        "repo.unregister",
        "repo.list",
        "repo.status",
        "config.get",
        "config.update",
        "prd.get",
        "prd.update",
        "task.list",
        "task.get",
        "task.create",
        "task.update",
        "task.delete",
        "events.subscribe",
        "events.unsubscribe",
        "rpc.discover",
    ):
        assert required in names
    create = next(m for m in doc["methods"] if m["name"] == "task.create")
    params = {p["name"]: p["required"] for p in create["params"]}
    assert params["title"] and params["acceptanceCriteria"] and not params["repo"]


def test_a_request_split_over_lines_and_two_on_one_line_are_parse_errors(
    daemon: DaemonProcess,
) -> None:
    """The fast path once ran all three pings; each broken line must be -32700."""
    sock = daemon.raw()
    try:
        ping = b'{"jsonrpc":"2.0","id":9,"method":"daemon.ping"}'
        sock.sendall(b'{"jsonrpc":"2.0",\n"id":1,"method":"daemon.ping"}\n' + ping + ping + b"\n")
        replies = read_messages(sock, 3)
        assert [r["error"]["code"] for r in replies] == [-32700, -32700, -32700]
        assert all("result" not in r for r in replies)
    finally:
        sock.close()
