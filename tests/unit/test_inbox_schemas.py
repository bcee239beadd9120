"""Every feedback schema's validation (seed 002): good answers normalised, bad ones named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from pokeralphd.domain.inbox import Delivery, FeedbackSchema, InvalidAnswer, validate_answer

schema_of = TypeAdapter(FeedbackSchema).validate_python

CONFIRM = schema_of({"type": "confirm", "prompt": "Deploy?"})
SELECT = schema_of({"type": "select", "options": ["staging", "production", "dev"]})
MULTI = schema_of({"type": "select", "options": ["a", "b", "c"], "multiple": True})
RATING = schema_of({"type": "rating", "max": 5})
FORM = schema_of(
    {
        "type": "form",
        "fields": [
            {"name": "priority", "type": "select", "options": ["P0", "P1"], "required": True},
            {"name": "description", "type": "textarea"},
            {"name": "count", "type": "number"},
            {"name": "urgent", "type": "checkbox"},
            {"name": "title", "type": "text", "required": True},
        ],
    }
)


@pytest.mark.parametrize(
    ("schema", "answer", "normalised"),
    [
        (CONFIRM, {"value": True}, {"value": True}),
        (CONFIRM, {"value": False}, {"value": False}),
        (SELECT, {"value": "staging"}, {"value": "staging"}),
        (MULTI, {"value": ["a", "c"]}, {"value": ["a", "c"]}),
        (MULTI, {"value": []}, {"value": []}),
        (RATING, {"value": 1}, {"value": 1}),
        (RATING, {"value": 5}, {"value": 5}),
        (
            FORM,
            {
                "values": {
                    "priority": "P1",
                    "title": "t",
                    "count": 2.5,
                    "urgent": False,
                    "description": "",
                }
            },
            {"values": {"priority": "P1", "title": "t", "count": 2.5, "urgent": False}},
        ),
    ],
)
def test_good_answers(schema: Any, answer: dict[str, Any], normalised: dict[str, Any]) -> None:
    assert validate_answer(schema, answer) == normalised


@pytest.mark.parametrize(
    ("schema", "answer", "field"),
    [
        (CONFIRM, {"value": "yes"}, "value"),
        (CONFIRM, {}, "value"),
        (SELECT, {"value": "prod"}, "value"),
        (SELECT, {"value": ["staging"]}, "value"),
        (MULTI, {"value": ["a", "z"]}, "value"),
        (MULTI, {"value": ["a", "a"]}, "value"),
        (MULTI, {"value": "a"}, "value"),
        (RATING, {"value": 0}, "value"),
        (RATING, {"value": 6}, "value"),
        (RATING, {"value": 4.5}, "value"),
        (RATING, {"value": True}, "value"),
        (FORM, {"values": {"title": "t"}}, "values.priority"),
        (FORM, {"values": {"priority": "P1", "title": "  "}}, "values.title"),
        (FORM, {"values": {"priority": "P9", "title": "t"}}, "values.priority"),
        (FORM, {"values": {"priority": "P1", "title": "t", "count": "2"}}, "values.count"),
        (FORM, {"values": {"priority": "P1", "title": "t", "urgent": "yes"}}, "values.urgent"),
        (FORM, {"values": {"priority": "P1", "title": "t", "nope": 1}}, "values.nope"),
        (FORM, {"priority": "P1"}, "values"),
    ],
)
def test_bad_answers_name_the_field(schema: Any, answer: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidAnswer) as info:
        validate_answer(schema, answer)
    assert info.value.field == field


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        max_size=4,
    )
)
def test_arbitrary_answers_never_crash(answer: dict[str, Any]) -> None:
    for schema in (CONFIRM, SELECT, MULTI, RATING, FORM):
        try:
            validate_answer(schema, answer)
        except InvalidAnswer:
            pass


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "select", "options": []},
        {"type": "rating", "max": 0},
        {"type": "form", "fields": []},
        {"type": "form", "fields": [{"name": "x", "type": "select"}]},
        {"type": "form", "fields": [{"name": "x", "type": "text"}, {"name": "x", "type": "text"}]},
        {"type": "poll"},
    ],
)
def test_bad_schemas_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        schema_of(raw)


def test_mode_and_schema_must_agree() -> None:
    base = {"id": "d_1_001", "title": "t", "status": "delivered"}
    with pytest.raises(ValidationError):
        Delivery.model_validate({**base, "mode": "passive", "feedbackSchema": {"type": "confirm"}})
    with pytest.raises(ValidationError):
        Delivery.model_validate({**base, "mode": "blocking", "status": "awaiting_feedback"})
    Delivery.model_validate({**base, "mode": "passive"})
