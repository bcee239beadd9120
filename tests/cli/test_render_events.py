"""Every event type the daemon publishes, rendered by the client (issue 22).

Each event is built from its struct in :mod:`pokeralphd.protocol.events` and encoded as
the bus encodes it (``msgspec.to_builtins``): once with its required fields only (the
nullable ones null, the documents it carries with their own required fields only), once
with every field set. The client's line for each must be there, say no ``None``, and
not fall back; an event without the shape of its type falls back to one line.
"""

from __future__ import annotations

import argparse
import functools
import io
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel

from pokeralphctl.commands.follow import follow_log, start_and_follow
from pokeralphctl.commands.render import render, shorten
from pokeralphctl.commands.stream import EventStream
from pokeralphctl.output import Output, dumps
from pokeralphctl.tui.board import Board
from pokeralphd.domain.inbox import (
    Annotation,
    ConfirmSchema,
    Content,
    Delivery,
    Feedback,
    Source,
)
from pokeralphd.domain.models import (
    PRD,
    CompletionSignal,
    Escalation,
    FeedbackResult,
    Progress,
    Task,
)
from pokeralphd.protocol import events as ev
from tests.cli.test_escapes import HOSTILE, unsafe
from tests.cli.test_follow import FakeDaemon, TypedInput
from tests.cli.test_follow import event as follow_event

TASK = "001-x"
AT = "2025-01-02T03:04:05Z"


def _doc(model: BaseModel, full: bool) -> dict[str, Any]:
    """A document as the daemon dumps it; without ``full``, its schema's required fields."""
    dumped = model.model_dump(mode="json", by_alias=True)
    if full:
        return dumped
    return {key: dumped[key] for key in _required_fields(type(model))}


@functools.cache
def _required_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields a model's JSON schema requires (built once a model: building a schema
    is most of what building an example costs, and every test builds several)."""
    return tuple(model.model_json_schema(by_alias=True).get("required", []))


def documents(full: bool) -> dict[str, Any]:
    """The documents the events carry as ``dict[str, Any]``, by field name."""
    result = FeedbackResult(
        passed=False, output="1 failed", duration=1200, command="make test", exit_code=1
    )
    task = Task(
        id=TASK, title="Add a cart", description="d", acceptance_criteria=["c"], status="completed"
    )
    delivery = Delivery(
        id="d_1700000000_001",
        mode="blocking",
        status="awaiting_feedback",
        title="Approve iteration 2?",
        content=Content(body="the diff"),
        feedback_schema=ConfirmSchema(type="confirm"),
        timeout_at=AT,
        completed_at=AT,
        source=Source(kind="battle_approval", task_id=TASK, iteration=2),
    )
    return {
        "config": {"agent": {"backend": "claude"}} if full else {},
        "patch": {"agent": {"backend": "codex"}, "maxIterations": 5} if full else {},
        "prd": _doc(PRD(name="Shop", description="d", tasks=[task], updated_at=AT), full),
        "task": _doc(task, full),
        "completion": _doc(CompletionSignal(kind="block", summary="cart added"), full),
        "progress": _doc(
            Progress(task_id=TASK, current_iteration=2, status="in_progress", error="x"), full
        ),
        "result": _doc(result, full),
        "results": {"test": _doc(result, full)},
        "escalation": _doc(
            Escalation(
                number=1,
                at=AT,
                phase="verification",
                reason="verification_cycles",
                message="verification failed 3 times",
                delivery_id="d_1700000000_002",
            ),
            full,
        ),
        "delivery": _doc(delivery, full),
        "feedback": _doc(Feedback(id="f_1700000000_001", values={"value": True}, note="ok"), full),
        "annotation": _doc(Annotation(id="a_1700000000_001", content="nice"), full),
    }


def _value(info: msgspec.inspect.Type, name: str, full: bool, docs: dict[str, Any]) -> Any:
    """A value of type ``info`` for the field ``name``: null where it may be, unless ``full``."""
    t = msgspec.inspect
    if isinstance(info, t.UnionType):
        if not full and any(isinstance(x, t.NoneType) for x in info.types):
            return None
        return _value(
            next(x for x in info.types if not isinstance(x, t.NoneType)), name, full, docs
        )
    if isinstance(info, t.LiteralType):
        return info.values[-1]
    if isinstance(info, t.StrType):
        return {"commitHash": "0123456789abcdef", "taskId": TASK, "changed": "status"}.get(
            name, f"some {name}"
        )
    if isinstance(info, t.BoolType):
        return True
    if isinstance(info, t.IntType):
        return 2
    if isinstance(info, t.FloatType):
        return 1.5 if name != "retryAt" and name != "rateLimitedUntil" else 1_700_000_000.0
    if isinstance(info, t.ListType):
        return [_value(info.item_type, name, full, docs)]
    if isinstance(info, t.StructType):
        return {f.encode_name: _value(f.type, f.encode_name, full, docs) for f in info.fields}
    if isinstance(info, t.DictType):
        if isinstance(info.value_type, t.AnyType) or name == "results":
            return docs[name]
        return {"test": _value(info.value_type, name, full, docs)}
    raise AssertionError(f"no example for {name}: {info}")


def example(cls: type[ev.Payload], full: bool) -> dict[str, Any]:
    """An event of type ``cls`` as the daemon sends it (the ``event`` notification's params)."""
    docs = documents(full)
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    raw = {
        f.encode_name: _value(f.type, f.encode_name, full, docs)
        for f in info.fields
        if f.required or full
    }
    payload = msgspec.to_builtins(msgspec.convert(raw, cls))
    event: dict[str, Any] = {
        "seq": 7,
        "type": ev.EVENT_NAMES[cls],
        "repo": "shop",
        "payload": payload,
        "timestamp": AT,
    }
    # the bus files a task's events under it; a task_created under no task
    if "taskId" in payload or cls is ev.TaskUpdated:
        event["taskId"] = payload["taskId"] if "taskId" in payload else payload["task"]["id"]
    return event


def lines_of(event: dict[str, Any]) -> list[str]:
    out = Output(stdout=io.StringIO(), stderr=io.StringIO(), verbose=1)
    return render(out, event)


def fallback(event: dict[str, Any]) -> str:
    """The line of an event the client could not read: its type and its JSON."""
    return f"{event['type']} {shorten(dumps(event['payload']))}"


@pytest.mark.parametrize("full", [False, True], ids=["required", "full"])
@pytest.mark.parametrize("cls", list(ev.EVENT_NAMES), ids=list(ev.EVENT_NAMES.values()))
def test_every_event_type_has_its_line(cls: type[ev.Payload], full: bool) -> None:
    event = example(cls, full)
    ev.check_event(event)  # what the daemon would send
    lines = lines_of(event)
    assert lines and all(line.strip() for line in lines), lines
    for line in lines:
        assert "None" not in line and " ?" not in line, line
        assert f"{event['type']} {{" not in line, f"shown as JSON, not read: {line}"
    task = event.get("taskId", TASK if "task" in event["payload"] else "-")
    assert lines[0].split()[1:3] == ["shop", task], lines


def _required(cls: type[ev.Payload]) -> list[str]:
    return [f.encode_name for f in msgspec.structs.fields(cls) if f.required]


WITH_REQUIRED = [cls for cls in ev.EVENT_NAMES if _required(cls)]


@pytest.mark.parametrize("cls", WITH_REQUIRED, ids=[ev.EVENT_NAMES[c] for c in WITH_REQUIRED])
def test_an_event_without_its_shape_falls_back_to_one_line(cls: type[ev.Payload]) -> None:
    event = example(cls, True)
    for name in _required(cls):
        broken = {**event, "payload": {k: v for k, v in event["payload"].items() if k != name}}
        lines = lines_of(broken)
        # the field was not needed for the line, or the line is the fallback
        assert lines and all("None" not in line for line in lines), (name, lines)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "iteration_end", "payload": {"iteration": 3}},
        {"type": "battle_failed", "payload": {"iterations": "x", "error": None}},
        {"type": "iteration_output", "payload": {"iteration": 1, "chunks": ["text"]}},
        {"type": "task_updated", "payload": {"task": None, "changed": ["status"], "version": 1}},
        {"type": "battle_escalated", "payload": {"escalation": []}},
    ],
    ids=["missing", "wrong-type", "bad-chunk", "null-document", "list-document"],
)
def test_a_malformed_event_prints_the_fallback_line(event: dict[str, Any]) -> None:
    event = {"seq": 1, "repo": "shop", "taskId": TASK, "timestamp": AT, **event}
    (line,) = lines_of(event)
    assert line.split(" ", 3)[1:3] == ["shop", TASK]
    assert line.endswith(fallback(event)), line


def test_an_envelope_without_its_shape_falls_back_too() -> None:
    for event in (
        {"type": "notice"},
        {"type": "notice", "payload": "text", "timestamp": 5},
        {"payload": {"message": "hi"}},
    ):
        (line,) = lines_of(event)
        assert "Traceback" not in line and line.strip(), line


def test_the_board_ignores_an_event_without_its_shape() -> None:
    board = Board()
    for event in (
        {"type": "iteration_output", "repo": "shop", "taskId": TASK, "payload": {"chunks": 3}},
        {"type": "iteration_start", "repo": "shop", "taskId": TASK, "payload": []},
        {"type": "iteration_output", "repo": "shop", "taskId": TASK},
    ):
        board.apply(event)
    good = example(ev.IterationStart, False)
    assert board.apply(good) == (("shop", TASK), [("── iteration 2 ──", "bold")])


def test_follow_goes_on_past_events_without_their_shape() -> None:
    """``battle start --follow`` on a newer daemon: lines it cannot read, then the end."""
    ctx = FakeDaemon(stdin=TypedInput("y\n"))
    broken = [
        follow_event("iteration_end", iteration=1),  # no result, no cost, ...
        follow_event("await_approval", result="success"),  # no iteration
        follow_event("iteration_output", iteration=1, chunks=[{"kind": "text"}]),
    ]
    ctx.events = [*broken, follow_event("battle_complete", iterations=1, costUsd=0.1)]
    assert start_and_follow(ctx, argparse.Namespace(), ctx.params(taskId=TASK)) == 0
    shown = ctx.stdout()
    for event in broken:
        assert fallback(event) in shown, shown
    assert "complete after 1 iteration, $0.10" in shown
    assert "Approve the iteration? [y/n/note]" in shown  # not "iteration None"
    assert ("battle.approve", ctx.params(taskId=TASK, approve=True, note=None)) in ctx.calls


def test_log_follow_goes_on_past_an_iteration_event_without_its_number() -> None:
    ctx = FakeDaemon()
    ctx.log = b"one\ntwo\n"
    ctx.events = [follow_event("iteration_start"), follow_event("battle_complete")]
    assert follow_log(ctx, argparse.Namespace(), ctx.params(taskId=TASK)) == 0
    assert ctx.stdout() == "one\ntwo\n"


def test_the_stream_leaves_out_what_is_not_an_event() -> None:
    ctx = FakeDaemon()
    stream = EventStream(ctx)
    for params in ([1, 2], {"type": "notice"}, {"type": 5, "payload": {}}, None):
        assert stream._accept({"method": "event", "params": params}) is None
    assert isinstance(ctx.out.stderr, io.StringIO)
    warnings = ctx.out.stderr.getvalue()
    assert warnings.count("warning: not an event: ") == 4, warnings
    good = {**example(ev.Notice, False), "seq": 9}
    assert stream._accept({"method": "event", "params": good}) == good


def _hostile(value: Any) -> Any:
    if isinstance(value, str):
        return HOSTILE
    if isinstance(value, list):
        return [_hostile(v) for v in value]
    if isinstance(value, dict):
        return {k: _hostile(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("cls", list(ev.EVENT_NAMES), ids=list(ev.EVENT_NAMES.values()))
def test_every_event_line_is_escaped_when_read(cls: type[ev.Payload]) -> None:
    """Every string an event carries (an agent's, a task's, a repository's) is hostile:
    the line, read field by field rather than shown as JSON, obeys none of them."""
    event = example(cls, True)
    hostile = {**event, "repo": HOSTILE, "payload": _hostile(event["payload"])}
    if "taskId" in event:
        hostile["taskId"] = HOSTILE
    if cls is ev.IterationOutput:
        hostile["payload"]["chunks"] = [{"kind": "text", "text": HOSTILE}]
    for line in lines_of(hostile):
        assert unsafe(line) == [], line
