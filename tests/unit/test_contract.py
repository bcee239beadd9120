"""The contract in ./shared is generated from the code: any drift fails here."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec
import pytest

import pokeralphctl.codes
from pokeralphd.protocol.codes import ERROR_DESCRIPTIONS, ErrorCode
from pokeralphd.protocol.contract import CLIENT_CODES, client_codes, render
from pokeralphd.protocol.events import EVENT_TYPES, check_event
from pokeralphd.server.methods import build_table
from tests.helpers import source_nodes

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "shared"


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


def test_the_clients_error_codes_are_generated() -> None:
    assert (ROOT / CLIENT_CODES).read_text() == client_codes(), (
        f"{CLIENT_CODES} is out of date; run `python -m pokeralphd.contract`"
    )
    generated = {name: value for name, value in vars(pokeralphctl.codes).items() if name.isupper()}
    assert generated.pop("NAMES") == {int(code): code.name for code in ErrorCode}
    assert generated == {code.name: int(code) for code in ErrorCode}
    assert set(ERROR_DESCRIPTIONS) == set(ErrorCode), "every code is described"


def test_every_event_type_has_a_schema_file() -> None:
    for name in EVENT_TYPES:
        schema = json.loads((SHARED / "schemas" / "events" / f"{name}.json").read_text())
        assert schema["properties"]["type"] == {"const": name}


def constructed_event_structs() -> dict[str, list[str]]:
    """Every event struct the daemon's code builds, by event type, with where (file:line).

    The daemon publishes the structs themselves (``publish(ev.BattlePaused(...))``), so
    an event type is whatever struct is built; mypy sees to it that only structs are
    published, and :func:`test_no_event_is_named_by_a_string` that nothing else is.
    """
    by_class = {cls.__name__: name for name, cls in EVENT_TYPES.items()}
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "pokeralphd").rglob("*.py")):
        if "demo/sample" in path.as_posix() or path.name == "events.py":
            continue
        for node in source_nodes(path):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in by_class:
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.setdefault(by_class[name], []).append(where)
    return found


def test_every_event_struct_is_published() -> None:
    built = constructed_event_structs()
    assert len(built) > 30  # the scan finds the calls
    unused = sorted(set(EVENT_TYPES) - set(built))
    assert not unused, f"payload structs of events nothing publishes: {unused}"


def test_no_event_is_named_by_a_string() -> None:
    """Issue 22: events were strings and dicts; now no ``publish`` anywhere in the daemon
    takes a string or a dict where the event struct goes."""
    wrong: list[str] = []
    for path in sorted((ROOT / "pokeralphd").rglob("*.py")):
        if "demo/sample" in path.as_posix():
            continue
        for node in source_nodes(path):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "publish"
                and node.args
                and isinstance(node.args[0], ast.Constant | ast.Dict | ast.JoinedStr)
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert wrong == []


def test_the_readme_names_every_event_type() -> None:
    readme = (SHARED / "README.md").read_text()
    missing = [name for name in EVENT_TYPES if name != "debug" and f"`{name}`" not in readme]
    assert not missing, f"shared/README.md does not list {missing}"


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
