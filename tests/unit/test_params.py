"""Params at the edge, in process: every bad value is Invalid params naming its field.

One test (or case) per finding of the fuzzing attack: ids with non-ASCII digits, task
numbers past 999, NUL bytes in paths, iterations below 1, unbounded timeouts, lengths and
numbers out of range, bools and floats where ints belong, unknown keys nobody could name.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from pokeralphd.domain import ids
from pokeralphd.domain.ids import (
    TASK_ID_RE,
    InvalidId,
    TaskNumbersExhausted,
    next_task_id,
    validate_delivery_id,
    validate_task_id,
)
from pokeralphd.domain.inbox import (
    ANSWER_INT_MAX,
    ANSWER_TEXT_MAX,
    MAX_WAIT_SECONDS,
    Delivery,
    FeedbackSchema,
    InvalidAnswer,
    validate_answer,
)
from pokeralphd.errors import InvalidParams
from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol import params as P
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.server.dispatch import Dispatcher, decode_params
from pokeralphd.server.methods import build_table

TABLE = build_table(debug=True)
# Arabic-Indic, Persian, full-width, Devanagari, Thai: all \d to Python, none of them [0-9]
NON_ASCII_DIGITS = [
    "\u0660\u0660\u0661",
    "\u06f0\u06f0\u06f1",
    "\uff11\uff12\uff13",
    "\u0966\u0966\u0967",
    "\u0e50\u0e50\u0e51",
]


def refused(method: str, raw: Any) -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        decode_params(TABLE.methods[method], raw)
    assert info.value.code == ErrorCode.INVALID_PARAMS
    return info.value


def field_of(method: str, raw: Any) -> str | None:
    return refused(method, raw).data.get("field")


def decoded(method: str, raw: Any) -> Any:
    return decode_params(TABLE.methods[method], raw)


TASK = {"title": "T", "description": "d", "acceptanceCriteria": ["c"]}


# ----------------------------------------------------------------------------- ids
@pytest.mark.parametrize("digits", NON_ASCII_DIGITS)
def test_ids_take_ascii_digits_only(digits: str) -> None:
    with pytest.raises(InvalidId):
        validate_task_id(f"{digits}-x")
    with pytest.raises(InvalidId):
        validate_delivery_id(f"d_{digits}_{digits}")
    with pytest.raises(ValidationError):  # the documents' own pattern (pydantic: Rust regex)
        Delivery.model_validate(
            {"id": f"d_1_{digits}", "mode": "passive", "status": "delivered", "title": "t"}
        )
    assert next_task_id("t", [f"{digits}{digits}-x"]) == "001-t"  # int() reads them: no more


def test_task_numbers_go_on_past_999() -> None:
    assert next_task_id("Next one", ["001-a", "999-last"]) == "1000-next-one"
    assert next_task_id("x", ["1000-a", "999-b"]) == "1001-x"
    assert validate_task_id("1000-next-one") == "1000-next-one"
    for bad in ("0001-x", "0999-x", "01000-x", "99-x"):  # one spelling per number
        with pytest.raises(InvalidId):
            validate_task_id(bad)


def test_a_long_task_number_leaves_less_room_for_the_slug() -> None:
    highest = "9" * 60 + "-x"  # 62 characters: a valid id
    new = next_task_id("A rather long title for a task", [validate_task_id(highest)])
    assert new == "1" + "0" * 60 + "-a" and validate_task_id(new) == new  # 64 characters
    with pytest.raises(TaskNumbersExhausted) as info:
        next_task_id("t", ["9" * 62 + "-x"])
    assert info.value.field == "id" and "give the task an id" in str(info.value)


@given(st.integers(min_value=0, max_value=10**58), st.text(max_size=80))
def test_generated_ids_always_validate(highest: int, title: str) -> None:
    existing = f"{highest:03d}-x"
    task_id = next_task_id(title, [existing])
    assert validate_task_id(task_id) == task_id
    assert int(task_id.split("-", 1)[0]) == highest + 1


async def _call(method: str, handler_error: Exception) -> dict[str, Any]:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable

    table = MethodTable()

    @table.add(method, P.NoParams, "raises", result=type(None))
    async def handler(ctx: CallContext, params: P.NoParams) -> None:
        raise handler_error

    dispatcher = Dispatcher(table)
    request = jsonrpc.Request("2.0", method, msgspec.UNSET, 1)
    reply = await dispatcher.call(request, CallContext(None, None))  # type: ignore[arg-type]
    assert reply is not None
    return reply


@pytest.mark.anyio
async def test_an_invalid_id_names_its_param() -> None:
    reply = await _call("x.y", TaskNumbersExhausted(999_999))
    assert reply["error"]["code"] == -32602 and reply["error"]["data"] == {"field": "id"}
    reply = await _call("x.y", InvalidId("delivery", "nope", ids.DELIVERY_ID_PATTERN))
    assert reply["error"]["data"] == {"field": "id", "value": "nope"}
    reply = await _call("x.y", InvalidId("task", "../x", ids.TASK_ID_PATTERN))
    assert reply["error"]["data"] == {"field": "taskId", "value": "../x"}


# ----------------------------------------------------------------------------- decode
@given(st.text(alphabet="0123456789-ax\n\u0663", max_size=12))
def test_the_wire_pattern_takes_exactly_what_validate_task_id_takes(value: str) -> None:
    try:
        validate_task_id(value)
    except InvalidId:
        ok = False
    else:
        ok = True
    wire = re.compile(ids.wire_pattern(ids.TASK_ID_PATTERN))
    assert bool(wire.search(value)) == ok == bool(TASK_ID_RE.fullmatch(value))


@pytest.mark.parametrize("digits", NON_ASCII_DIGITS)
def test_ids_with_non_ascii_digits_are_refused_at_decode(digits: str) -> None:
    assert field_of("task.get", {"taskId": f"{digits}-x"}) == "taskId"
    assert field_of("task.create", {**TASK, "id": f"{digits}-x"}) == "id"
    assert field_of("inbox.get", {"id": f"d_1_{digits}"}) == "id"
    assert field_of("events.subscribe", {"taskId": f"{digits}-x"}) == "taskId"


def test_a_task_number_past_999_decodes() -> None:
    assert decoded("task.get", {"taskId": "1000-x"}).task_id == "1000-x"
    assert field_of("task.get", {"taskId": "0999-x"}) == "taskId"


@pytest.mark.parametrize("bad", ["../x", "001-x\n", "001-x/../y", "001-A", "", "x" * 65])
def test_bad_task_ids_are_named_at_decode(bad: str) -> None:
    assert field_of("task.get", {"taskId": bad}) == "taskId"
    assert field_of("task.create", {**TASK, "id": bad}) == "id"
    assert field_of("battle.start", [bad]) == "taskId"


def test_a_pattern_error_says_what_is_expected() -> None:
    message = refused("task.get", {"taskId": "../x"}).message
    assert "a task id NNN-slug" in message and "regex" not in message
    assert "a delivery id like" in refused("inbox.get", {"id": "x"}).message
    assert "without a NUL byte" in refused("repo.status", {"repo": "/a\x00"}).message


# ----------------------------------------------------------------------------- paths
@pytest.mark.parametrize(
    ("method", "raw", "field"),
    [
        ("repo.register", {"path": "/tmp/a\x00b"}, "path"),
        ("repo.register", {"path": "\x00"}, "path"),
        ("repo.register", {"path": ""}, "path"),
        ("repo.register", {"path": "/" + "x" * P.PATH_MAX}, "path"),
        ("repo.status", {"repo": "/tmp/r\x00"}, "repo"),
        ("task.get", {"taskId": "001-x", "repo": "r\x00"}, "repo"),
        ("inbox.list", {"repo": "/x/\x00/y"}, "repo"),
        ("events.subscribe", {"repo": "\x00"}, "repo"),
    ],
)
def test_a_nul_byte_or_an_endless_path_is_refused(method: str, raw: Any, field: str) -> None:
    assert field_of(method, raw) == field


def test_every_repo_param_is_checked() -> None:
    for name, method in TABLE.methods.items():
        if "repo" in method.params.__struct_encode_fields__:
            assert field_of(name, {"repo": "a\x00"}) == "repo", name


# ----------------------------------------------------------------------------- numbers
@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"iteration": 0}, "iteration"),
        ({"iteration": -1}, "iteration"),
        ({"iteration": P.ITERATION_MAX + 1}, "iteration"),
        ({"iteration": 1.0}, "iteration"),
        ({"iteration": True}, "iteration"),
        ({"offset": P.LOG_OFFSET_MAX + 1}, "offset"),
        ({"offset": -P.LOG_OFFSET_MAX - 1}, "offset"),
        ({"tail": -1}, "tail"),
        ({"tail": P.LOG_TAIL_MAX + 1}, "tail"),
        ({"limit": 0}, "limit"),
        ({"limit": P.LOG_LIMIT_MAX + 1}, "limit"),
        ({"limit": 10**30}, "limit"),
    ],
)
def test_battle_log_bounds(raw: dict[str, Any], field: str) -> None:
    assert field_of("battle.log", {"taskId": "001-x", **raw}) == field


def test_battle_log_takes_its_bounds() -> None:
    p = decoded(
        "battle.log",
        {
            "taskId": "001-x",
            "iteration": 1,
            "offset": -P.LOG_OFFSET_MAX,
            "tail": 0,
            "limit": P.LOG_LIMIT_MAX,
        },
    )
    assert (p.iteration, p.offset, p.tail, p.limit) == (1, -P.LOG_OFFSET_MAX, 0, 4 << 20)


@pytest.mark.parametrize(
    "value", [0, -1, -0.0, MAX_WAIT_SECONDS + 1, 1e308, 10**30, math.nan, math.inf, -math.inf]
)
def test_inbox_create_timeout_is_positive_and_at_most_a_week(value: float) -> None:
    raw = {"title": "t", "schema": {"type": "confirm"}, "timeoutSeconds": value}
    assert field_of("inbox.create", raw) == "timeoutSeconds"


@pytest.mark.parametrize("value", [-1, -1e-9, MAX_WAIT_SECONDS + 0.5, 1e308, math.nan, math.inf])
def test_inbox_wait_timeout_is_at_most_a_week(value: float) -> None:
    assert field_of("inbox.wait", {"id": "d_1_001", "timeout": value}) == "timeout"


def test_timeouts_take_ints_and_their_bounds() -> None:
    assert decoded("inbox.wait", {"id": "d_1_001", "timeout": 0}).timeout == 0
    assert decoded("inbox.wait", {"id": "d_1_001", "timeout": MAX_WAIT_SECONDS}).timeout == 604800
    raw = {"title": "t", "timeoutSeconds": 5}
    assert decoded("inbox.create", raw).timeout_seconds == 5.0


@pytest.mark.parametrize(
    ("method", "raw", "field"),
    [
        ("task.create", {**TASK, "priority": 0}, "priority"),
        ("task.create", {**TASK, "priority": P.PRIORITY_MAX + 1}, "priority"),
        ("task.create", {**TASK, "priority": True}, "priority"),
        ("task.create", {**TASK, "priority": 1.0}, "priority"),
        ("task.create", {**TASK, "priority": 2.5}, "priority"),
        ("task.create", {**TASK, "priority": "1"}, "priority"),
        ("task.create", {**TASK, "expectedVersion": -1}, "expectedVersion"),
        ("task.update", {"taskId": "001-x", "priority": 10**30}, "priority"),
        ("task.delete", {"taskId": "001-x", "expectedVersion": 2**53}, "expectedVersion"),
        ("config.update", {"patch": {}, "expectedVersion": False}, "expectedVersion"),
        ("battle.start", {"taskId": "001-x", "maxIterations": 0}, "maxIterations"),
        ("battle.start", {"taskId": "001-x", "maxIterations": 101}, "maxIterations"),
        ("battle.start", {"taskId": "001-x", "maxIterations": True}, "maxIterations"),
        ("events.subscribe", {"since": -1}, "since"),
        ("events.subscribe", {"since": 2**63}, "since"),
        ("events.subscribe", {"since": 1.5}, "since"),
        ("events.unsubscribe", {"subscription": 0}, "subscription"),
        ("events.unsubscribe", {"subscription": 2**64}, "subscription"),
        ("events.unsubscribe", {"subscription": True}, "subscription"),
        ("battle.pause", {"now": 1}, "now"),
        ("repo.register", {"path": "/x", "gitInit": 0}, "gitInit"),
        ("debug.emit", {"count": 0}, "count"),
        ("debug.emit", {"count": 1_000_001}, "count"),
        ("debug.emit", {"size": 65537}, "size"),
    ],
)
def test_integers_are_whole_in_range_and_never_bools(method: str, raw: Any, field: str) -> None:
    assert field_of(method, raw) == field


# ----------------------------------------------------------------------------- lengths
@pytest.mark.parametrize(
    ("method", "raw", "field"),
    [
        ("task.create", {**TASK, "title": "x" * (P.TITLE_MAX + 1)}, "title"),
        ("task.create", {**TASK, "title": ""}, "title"),
        ("task.create", {**TASK, "description": "x" * (P.TEXT_MAX + 1)}, "description"),
        ("task.create", {**TASK, "acceptanceCriteria": []}, "acceptanceCriteria"),
        ("task.create", {**TASK, "acceptanceCriteria": ["c"] * 1001}, "acceptanceCriteria"),
        ("task.create", {**TASK, "acceptanceCriteria": ["c", ""]}, "acceptanceCriteria[1]"),
        ("task.create", {**TASK, "acceptanceCriteria": ["c", 3]}, "acceptanceCriteria[1]"),
        ("task.update", {"taskId": "001-x", "title": "x" * 201}, "title"),
        ("task.update", {"taskId": "001-x", "status": "s" * 65}, "status"),
        ("prd.update", {"name": "x" * 201}, "name"),
        ("prd.update", {"description": ""}, "description"),
        ("battle.approve", {"note": "x" * (P.TEXT_MAX + 1)}, "note"),
        ("inbox.create", {"title": "x" * 201}, "title"),
        ("inbox.create", {"title": "t", "body": "x" * (P.TEXT_MAX + 1)}, "body"),
        ("inbox.answer", {"id": "d_1_001", "values": {}, "note": "x" * (P.TEXT_MAX + 1)}, "note"),
        ("inbox.annotate", {"id": "d_1_001", "content": ""}, "content"),
        ("planning.start", {"idea": "x" * (P.TEXT_MAX + 1)}, "idea"),
        ("planning.answer", {"answer": "x" * (P.TEXT_MAX + 1)}, "answer"),
        ("events.subscribe", {"types": ["t"] * 257}, "types"),
        ("events.subscribe", {"types": ["t", ""]}, "types[1]"),
        ("repo.register", {"path": "/x", "name": "n" * 65}, "name"),
    ],
)
def test_strings_and_lists_are_bounded(method: str, raw: Any, field: str) -> None:
    assert field_of(method, raw) == field


def test_the_bounds_themselves_are_taken() -> None:
    raw = {
        "title": "x" * P.TITLE_MAX,
        "description": "x" * P.TEXT_MAX,
        "acceptanceCriteria": ["c"] * P.LIST_MAX,
        "priority": P.PRIORITY_MAX,
    }
    assert decoded("task.create", raw).priority == P.PRIORITY_MAX


# ----------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("key", ["", "`", "a`b", "x` - at `$.y", "\x00", "taskid"])
def test_an_unknown_param_is_named_whatever_its_name(key: str) -> None:
    error = refused("task.get", {"taskId": "001-x", key: 1})
    assert error.data["field"] == key and error.data["expected"] == ["taskId", "repo"]


def test_too_many_params_by_position_list_the_params() -> None:
    error = refused("task.get", ["001-x", None, 3])
    assert error.data == {"expected": ["taskId", "repo"]}


def test_a_missing_param_is_named() -> None:
    assert field_of("task.create", {"title": "t", "description": "d"}) == "acceptanceCriteria"
    assert field_of("inbox.answer", ["d_1_001"]) == "values"


# ----------------------------------------------------------------------------- answers
SCHEMA = TypeAdapter(FeedbackSchema).validate_python
FORM = SCHEMA(
    {"type": "form", "fields": [{"name": "a", "type": "text"}, {"name": "n", "type": "number"}]}
)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"values": {"a": "x" * (ANSWER_TEXT_MAX + 1)}}, "values.a"),
        ({"values": {"n": math.nan}}, "values.n"),
        ({"values": {"n": math.inf}}, "values.n"),
        ({"values": {"n": -math.inf}}, "values.n"),
        ({"values": {"n": ANSWER_INT_MAX + 1}}, "values.n"),
        ({"values": {"n": -(10**400)}}, "values.n"),
        ({"values": {"n": True}}, "values.n"),
    ],
)
def test_answer_values_are_bounded(values: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidAnswer) as info:
        validate_answer(FORM, values)
    assert info.value.field == field


def test_answer_values_take_their_bounds() -> None:
    values = {"a": "x" * ANSWER_TEXT_MAX, "n": -ANSWER_INT_MAX}
    assert validate_answer(FORM, {"values": values}) == {"values": values}
    assert validate_answer(FORM, {"values": {"n": 1e308}}) == {"values": {"n": 1e308}}


def test_a_huge_multiple_select_answer_is_refused_at_once() -> None:
    schema = SCHEMA({"type": "select", "options": [str(i) for i in range(5000)], "multiple": True})
    started = time.monotonic()
    with pytest.raises(InvalidAnswer):
        validate_answer(schema, {"value": ["x"] * 100_000})
    with pytest.raises(InvalidAnswer):
        validate_answer(schema, {"value": [str(i) for i in range(5000)] + ["0"]})
    assert validate_answer(schema, {"value": [str(i) for i in range(5000)]})["value"][-1] == "4999"
    assert time.monotonic() - started < 5  # was one list scan per chosen item: minutes


# ----------------------------------------------------------------------------- framing
@pytest.mark.parametrize("depth", [2000, 100_000])
def test_json_nested_too_deep_is_a_decode_error_not_a_crash(depth: int) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"m","params":[' + b"[" * depth + b"]" * depth + b"]}"
    assert jsonrpc.decode_fast([body]) is None
    assert jsonrpc.decode_fast(body + b"\n") is None
    assert jsonrpc.decode_fast([body, body]) is None
    with pytest.raises(jsonrpc.ParseError, match="nested deeper than"):
        jsonrpc.decode(body)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidParams("nope", field="x"), -32602),
        (TaskNumbersExhausted(999_999), -32602),
        (RuntimeError("a bug"), -32603),
    ],
)
@pytest.mark.anyio
async def test_a_synchronous_handler_answers_alike_on_either_path(
    error: Exception, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain-function handler (daemon.ping's kind) runs without a coroutine through
    call_now, the pipelining hot path, and through call: the same replies either way, a
    bug logged and answered as an internal error."""
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable

    table = MethodTable()

    @table.add("x.ok", P.NoParams, "answers", result=str)
    def ok(ctx: CallContext, params: P.NoParams) -> str:
        return "fine"

    @table.add("x.fails", P.NoParams, "raises", result=type(None))
    def fails(ctx: CallContext, params: P.NoParams) -> None:
        raise error

    dispatcher = Dispatcher(table)
    assert dispatcher.method_kinds() == (frozenset(), frozenset({"x.ok", "x.fails"}))
    ctx = CallContext(None, None)  # type: ignore[arg-type]
    for method, expected in (("x.ok", None), ("x.fails", code)):
        request = jsonrpc.Request("2.0", method, msgspec.UNSET, 7)
        now = dispatcher.call_now(request, ctx)
        later = await dispatcher.call(request, ctx)
        assert now == later
        assert now is not None
        if expected is None:
            assert now == {"jsonrpc": "2.0", "id": 7, "result": "fine"}
        else:
            assert now["error"]["code"] == expected
        notification = jsonrpc.Request("2.0", method, msgspec.UNSET, msgspec.UNSET)
        assert dispatcher.call_now(notification, ctx) is None
    logged = [r for r in caplog.records if "internal error in x.fails" in r.getMessage()]
    assert len(logged) == (3 if code == -32603 else 0)


def test_a_synchronous_handler_cannot_be_concurrent() -> None:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable

    table = MethodTable()
    with pytest.raises(ValueError, match="cannot be concurrent"):

        @table.add("x.wait", P.NoParams, "waits", result=str, concurrent=True)
        def wait(ctx: CallContext, params: P.NoParams) -> str:
            return "never"


@pytest.mark.anyio
async def test_a_handler_behind_a_decorator_is_awaited_when_either_is_async() -> None:
    import functools

    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable

    def plain_wrapper(handler: Any) -> Any:
        @functools.wraps(handler)
        def wrapper(ctx: CallContext, params: P.NoParams) -> Any:
            return handler(ctx, params)  # the coroutine, for the dispatcher to await

        return wrapper

    def async_wrapper(handler: Any) -> Any:
        @functools.wraps(handler)
        async def wrapper(ctx: CallContext, params: P.NoParams) -> Any:
            return handler(ctx, params)

        return wrapper

    table = MethodTable()

    @table.add("x.inner", P.NoParams, "an async handler, a plain wrapper", result=str)
    @plain_wrapper
    async def inner(ctx: CallContext, params: P.NoParams) -> str:
        return "inner"

    @table.add("x.outer", P.NoParams, "a plain handler, an async wrapper", result=str)
    @async_wrapper
    def outer(ctx: CallContext, params: P.NoParams) -> str:
        return "outer"

    dispatcher = Dispatcher(table)
    assert dispatcher.method_kinds()[1] == frozenset()
    for name in ("inner", "outer"):
        request = jsonrpc.Request("2.0", f"x.{name}", msgspec.UNSET, 1)
        reply = await dispatcher.call(request, CallContext(None, None))  # type: ignore[arg-type]
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": name}
