"""The human inbox (seed 002, made part of the daemon): deliveries, feedback schemas,
answers validated against them, annotations. Pure: no I/O.

A delivery is something shown to a person: ``passive`` (no answer expected),
``interactive`` (an answer is welcome) or ``blocking`` (someone waits for the answer; a
timeout ends the wait, not the delivery, which stays answerable).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from pokeralph_core.timeutil import Timestamp, utcnow
from pokeralphd.domain.models import Model

DeliveryMode = Literal["passive", "interactive", "blocking"]
DeliveryStatus = Literal["delivered", "awaiting_feedback", "completed", "timeout"]
DELIVERY_TRANSITIONS: dict[str, frozenset[str]] = {
    "delivered": frozenset(),
    "awaiting_feedback": frozenset({"completed", "timeout"}),
    "timeout": frozenset({"completed"}),  # a late answer is still taken
    "completed": frozenset(),
}
ID_RE = re.compile(r"^[dafs]_[0-9]{1,12}_[0-9]{3,6}$", re.ASCII)  # ASCII digits only
MAX_WAIT_SECONDS = 7 * 24 * 3600  # a blocking delivery's timeout, an inbox.wait: one week
ANSWER_TEXT_MAX = 1 << 20  # characters of a text answer (a form's text or textarea)
ANSWER_INT_MAX = (1 << 63) - 1  # a number answer that is an integer fits in 64 bits


class InvalidAnswer(ValueError):
    """Raised when an answer does not fit the delivery's feedback schema."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


# ----------------------------------------------------------------------------- schemas
class ConfirmSchema(Model):
    type: Literal["confirm"]
    prompt: str = "Confirm?"
    confirm_label: str = "Confirm"
    cancel_label: str = "Cancel"


class SelectSchema(Model):
    type: Literal["select"]
    prompt: str = "Choose"
    options: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    multiple: StrictBool = False


FieldType = Literal["text", "number", "textarea", "select", "checkbox"]


class FormField(Model):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    type: FieldType
    label: str = ""
    options: list[str] | None = None
    placeholder: str | None = None
    required: StrictBool = False

    @model_validator(mode="after")
    def _select_has_options(self) -> FormField:
        if self.type == "select" and not self.options:
            raise ValueError(f"form field {self.name!r} of type select needs options")
        return self


class FormSchema(Model):
    type: Literal["form"]
    prompt: str = ""
    fields: list[FormField] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> FormSchema:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("form field names must be unique")
        return self


class RatingSchema(Model):
    type: Literal["rating"]
    prompt: str = "Rate it"
    max: StrictInt = Field(default=5, ge=1, le=100)


FeedbackSchema = Annotated[
    ConfirmSchema | SelectSchema | FormSchema | RatingSchema, Field(discriminator="type")
]


def validate_answer(
    schema: ConfirmSchema | SelectSchema | FormSchema | RatingSchema, values: Any
) -> dict[str, Any]:
    """The answer normalised to the seed's response shape, or :class:`InvalidAnswer`.

    confirm: ``{"value": bool}``; select: ``{"value": str}`` or ``{"value": [str, …]}``;
    form: ``{"values": {name: value}}``; rating: ``{"value": 1..max}``.
    """
    if not isinstance(values, dict):
        raise InvalidAnswer("the answer must be an object", "values")
    if isinstance(schema, ConfirmSchema):
        value = values.get("value")
        if not isinstance(value, bool):
            raise InvalidAnswer('a confirm answer is {"value": true|false}', "value")
        return {"value": value}
    if isinstance(schema, SelectSchema):
        value = values.get("value")
        if schema.multiple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidAnswer("this select takes a list of options", "value")
            if len(value) > len(schema.options):  # before the work below: answers are unbounded
                raise InvalidAnswer(f"at most {len(schema.options)} options to choose", "value")
            offered = set(schema.options)
            unknown = [v for v in value if v not in offered]
            if unknown:
                raise InvalidAnswer(
                    f"not an offered option: {', '.join(map(repr, unknown))}", "value"
                )
            if len(set(value)) != len(value):
                raise InvalidAnswer("an option is chosen twice", "value")
            return {"value": value}
        if not isinstance(value, str) or value not in schema.options:
            raise InvalidAnswer(f"choose one of: {', '.join(map(repr, schema.options))}", "value")
        return {"value": value}
    if isinstance(schema, RatingSchema):
        value = values.get("value")
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= schema.max:
            raise InvalidAnswer(f"a rating is a whole number from 1 to {schema.max}", "value")
        return {"value": value}
    given = values.get("values")
    if not isinstance(given, dict):
        raise InvalidAnswer('a form answer is {"values": {field: value}}', "values")
    known = {f.name: f for f in schema.fields}
    extra = sorted(set(given) - set(known))
    if extra:
        raise InvalidAnswer(f"unknown form field: {extra[0]}", f"values.{extra[0]}")
    out: dict[str, Any] = {}
    for name, spec in known.items():
        value = given.get(name)
        empty = value is None or (isinstance(value, str) and not value.strip())
        if empty:
            if spec.required:
                raise InvalidAnswer(f"{spec.label or name} is required", f"values.{name}")
            continue
        out[name] = _field_value(spec, value)
    return {"values": out}


def _field_value(spec: FormField, value: Any) -> Any:
    where = f"values.{spec.name}"
    if spec.type in ("text", "textarea"):
        if not isinstance(value, str):
            raise InvalidAnswer(f"{spec.name} must be text", where)
        if len(value) > ANSWER_TEXT_MAX:
            raise InvalidAnswer(f"{spec.name} holds at most {ANSWER_TEXT_MAX} characters", where)
        return value
    if spec.type == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidAnswer(f"{spec.name} must be a number", where)
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidAnswer(f"{spec.name} must be a finite number", where)
        if isinstance(value, int) and abs(value) > ANSWER_INT_MAX:
            raise InvalidAnswer(
                f"{spec.name} must fit in 64 bits (at most {ANSWER_INT_MAX})", where
            )
        return value
    if spec.type == "checkbox":
        if not isinstance(value, bool):
            raise InvalidAnswer(f"{spec.name} must be true or false", where)
        return value
    if not isinstance(value, str) or value not in (spec.options or []):
        raise InvalidAnswer(f"{spec.name} must be one of: {', '.join(spec.options or [])}", where)
    return value


# ----------------------------------------------------------------------------- records
class Content(Model):
    # html: shown by the dashboard in a sandboxed frame (no scripts, no requests)
    type: Literal["markdown", "text", "html"] = "markdown"
    body: str = ""


class Source(Model):
    """Who asked (ours): the daemon for a battle approval or a planning question, or an agent."""

    kind: Literal[
        "battle_approval",
        "battle_failed",
        "battle_escalation",
        "battle_budget",
        "permission",
        "planning",
        "agent",
        "user",
    ] = "user"
    task_id: str | None = None
    iteration: int | None = None


class Delivery(Model):
    id: str = Field(pattern=ID_RE.pattern)
    mode: DeliveryMode
    status: DeliveryStatus
    title: str = Field(min_length=1, max_length=200)
    content: Content = Field(default_factory=Content)
    feedback_schema: FeedbackSchema | None = None
    created_at: Timestamp = Field(default_factory=utcnow)
    completed_at: Timestamp | None = None
    # ours
    timeout_at: Timestamp | None = None
    source: Source = Field(default_factory=Source)

    @model_validator(mode="after")
    def _schema_fits_mode(self) -> Delivery:
        if self.mode == "passive" and self.feedback_schema is not None:
            raise ValueError("a passive delivery has no feedback schema")
        if self.mode != "passive" and self.feedback_schema is None:
            raise ValueError(f"an {self.mode} delivery needs a feedback schema")
        return self


class IndexEntry(Model):
    id: str
    mode: DeliveryMode
    status: DeliveryStatus
    title: str
    created_at: Timestamp
    completed_at: Timestamp | None = None


class Index(Model):
    items: list[IndexEntry] = Field(default_factory=list)


class Feedback(Model):
    id: str = Field(pattern=ID_RE.pattern)
    values: dict[str, Any]
    note: str | None = None  # ours: free text beside the schema's answer
    created_at: Timestamp = Field(default_factory=utcnow)


class FeedbackList(Model):
    items: list[Feedback] = Field(default_factory=list)


class TextTarget(Model):
    type: Literal["text_range", "line", "section"]
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    line: StrictInt | None = Field(default=None, ge=1)
    section: str | None = None


class Annotation(Model):
    id: str = Field(pattern=ID_RE.pattern)
    type: Literal["comment", "highlight"] = "comment"
    content: str = Field(min_length=1)
    target: TextTarget | None = None
    created_at: Timestamp = Field(default_factory=utcnow)


class AnnotationList(Model):
    items: list[Annotation] = Field(default_factory=list)
