"""The contract in ./shared is generated from the code: any drift fails here."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from pokeralphd.protocol.contract import render
from pokeralphd.protocol.events import EVENT_TYPES, check_event
from pokeralphd.server.methods import build_table

SHARED = Path(__file__).resolve().parents[2] / "shared"


def test_shared_matches_the_code() -> None:
    expected = render(build_table().methods.values())
    stale = [
        rel
        for rel, content in expected.items()
        if not (SHARED / rel).exists() or (SHARED / rel).read_text() != content
    ]
    generated = {str(p.relative_to(SHARED)) for p in (SHARED / "schemas").rglob("*.json")} | {
        "openrpc.json"
    }
    extra = sorted(generated - set(expected))
    assert not stale and not extra, (
        f"shared/ is out of date ({stale + extra}); run `python -m pokeralphd.contract`"
    )


def test_every_event_type_has_a_schema_file() -> None:
    for name in EVENT_TYPES:
        schema = json.loads((SHARED / "schemas" / "events" / f"{name}.json").read_text())
        assert schema["properties"]["type"] == {"const": name}


def test_every_method_has_a_result_schema() -> None:
    doc = json.loads((SHARED / "openrpc.json").read_text())
    for method in doc["methods"]:
        assert method["result"]["schema"], f"{method['name']} has no result schema"
    text = json.dumps(doc)
    for name in ("Task", "Battle", "Delivery", "Progress", "Config", "PRD"):
        assert f"#/components/schemas/{name}" in text and name in doc["components"]["schemas"]


def test_openrpc_lists_errors_and_methods() -> None:
    doc = json.loads((SHARED / "openrpc.json").read_text())
    assert doc["components"]["errors"]["VERSION_CONFLICT"]["code"] == -32003
    assert {"battle.start", "inbox.wait", "planning.finish"} <= {m["name"] for m in doc["methods"]}


@pytest.mark.parametrize(
    "event",
    [
        {
            "seq": 1,
            "type": "task_deleted",
            "repo": "r",
            "taskId": "001-a",
            "payload": {"taskId": "001-a", "version": 3},
            "timestamp": "2026-11-23T00:00:00.000Z",
        },
        {
            "seq": 2,
            "type": "iteration_output",
            "repo": "r",
            "taskId": "001-a",
            "payload": {
                "taskId": "001-a",
                "iteration": 1,
                "chunks": [{"kind": "text", "text": "hi"}],
            },
            "timestamp": "2026-11-23T00:00:00.000Z",
        },
        {
            "seq": 3,
            "type": "battle_paused",
            "repo": "r",
            "taskId": "001-a",
            "payload": {"taskId": "001-a", "reason": "rate limited", "rateLimitedUntil": 1.5},
            "timestamp": "t",
        },
    ],
)
def test_example_events_validate(event: dict[str, object]) -> None:
    check_event(event)


@pytest.mark.parametrize(
    "event",
    [
        {
            "seq": 1,
            "type": "task_deleted",
            "repo": "r",
            "payload": {"version": 3},
            "timestamp": "t",
        },
        {"seq": 1, "type": "no_such_event", "repo": "r", "payload": {}, "timestamp": "t"},
        {
            "seq": 1,
            "type": "task_deleted",
            "repo": "r",
            "payload": {"taskId": "x", "version": 1, "extra": 1},
            "timestamp": "t",
        },
    ],
)
def test_bad_events_do_not(event: dict[str, object]) -> None:
    with pytest.raises(msgspec.ValidationError):
        check_event(event)
