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


# Calls that take an event type: publish(type, ...) on the bus, a store, an orchestrator,
# an inbox, a planner; RepoStore.update_prd(change, expected, event, ...).
EVENT_ARG = {"publish": 0, "update_prd": 2, "_update_prd": 2}


class _EventTypes(ast.NodeVisitor):
    def __init__(self, where: str) -> None:
        self.where = where
        self.found: dict[str, list[str]] = {}
        self.funcs: list[ast.FunctionDef | ast.AsyncFunctionDef] = []  # enclosing, inner last

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.funcs.append(node)
        self.generic_visit(node)
        self.funcs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, call: ast.Call) -> None:
        self.generic_visit(call)
        name = getattr(call.func, "attr", getattr(call.func, "id", None))
        if name not in EVENT_ARG:
            return
        index = EVENT_ARG[name]
        keyword = next((k.value for k in call.keywords if k.arg in ("type_", "event")), None)
        arg = call.args[index] if len(call.args) > index else keyword
        where = f"{self.where}:{call.lineno}"
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            self.found.setdefault(arg.value, []).append(where)
            return
        # A parameter of an enclosing publish/update_prd (a closure inside one counts).
        forwarded = isinstance(arg, ast.Name) and any(
            func.name in EVENT_ARG
            and arg.id in {a.arg for a in func.args.args + func.args.kwonlyargs}
            for func in self.funcs
        )
        assert forwarded, f"{where}: an event type that is not a string literal"


def published_event_types() -> dict[str, list[str]]:
    """Every event type the daemon's code can publish, with where (file:line).

    An event type must be a string literal at the call, or a parameter that the
    enclosing function (itself a ``publish`` or ``update_prd``) forwards: anything else
    fails, so no event type can hide from this test behind a variable.
    """
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "pokeralphd").rglob("*.py")):
        if "demo/sample" in path.as_posix():
            continue
        visitor = _EventTypes(str(path.relative_to(ROOT)))
        visitor.visit(ast.parse(path.read_text()))
        for name, places in visitor.found.items():
            found.setdefault(name, []).extend(places)
    return found


def test_every_published_event_type_has_a_struct() -> None:
    published = published_event_types()
    assert len(published) > 30  # the scan finds the calls
    missing = sorted(set(published) - set(EVENT_TYPES))
    assert not missing, f"published without a payload struct in protocol/events.py: {missing}"
    unused = sorted(set(EVENT_TYPES) - set(published))
    assert not unused, f"payload structs of events nothing publishes: {unused}"


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
