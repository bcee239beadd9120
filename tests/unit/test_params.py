"""Params at the edge, in process: every bad value is Invalid params naming its field.

One test (or case) per finding of the fuzzing attack: ids with non-ASCII digits, task
numbers past 999, NUL bytes in paths, iterations below 1, unbounded timeouts, lengths and
numbers out of range, bools and floats where ints belong, unknown keys nobody could name.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pokeralphd.domain import ids
from pokeralphd.domain.ids import (
    InvalidId,
    TaskNumbersExhausted,
    next_task_id,
    validate_delivery_id,
    validate_task_id,
)
from pokeralphd.domain.inbox import (
    Delivery,
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
    from pokeralphd.server.dispatch import CallContext, MethodTable

    table = MethodTable()

    @table.add(method, P.NoParams, "raises")
    async def handler(ctx: CallContext, params: P.NoParams) -> None:
        raise handler_error

    dispatcher = Dispatcher(table, None)  # type: ignore[arg-type]
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
