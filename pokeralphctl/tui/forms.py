"""The answer form of an inbox item, generated from its feedback schema.

Each schema of :mod:`pokeralphd.domain.inbox` gets widgets a keyboard can drive:

- ``confirm``: a radio set of its two labels;
- ``select``: a radio set of its options, or a selection list when ``multiple``;
- ``rating``: a radio set 1..max (an integer input past ten);
- ``form``: per field, an input (``text``; ``number``, typed), a text area (``textarea``),
  a radio set (``select``) or a checkbox (``checkbox``).

A note goes with any answer. :func:`answer_of` turns what the widgets hold into the
answer's shape (``{"value": …}`` or ``{"values": {…}}``, as ``pokeralphctl answer`` sends
it); the daemon checks it against the schema, and its error is shown at the field it names
(``data.field``), the form staying open. ctrl+s sends, escape closes without answering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    Checkbox,
    Input,
    Label,
    RadioButton,
    RadioSet,
    SelectionList,
    Static,
    TextArea,
)

from pokeralphctl.client import ClientError, RequestFailed
from pokeralphctl.output import clean
from pokeralphctl.tui.bridge import Call, post

if TYPE_CHECKING:
    from textual.app import ComposeResult
    from textual.widget import Widget

    from pokeralphctl.tui.link import Link

#: Ratings up to this many points are a radio set; past it, a number to type.
RADIO_RATING_MAX = 10
#: Characters of a delivery's body shown above its form.
BODY_MAX = 4000


def number(text: str) -> int | float | str:
    """A number field's value: an int or a float, else the text (the daemon says why not)."""
    raw = text.strip()
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def answer_of(schema: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
    """The answer to send, from what each widget holds (``held``: the widget values by
    name, ``"value"`` for the whole answer of a confirm, select or rating). Empty form
    fields are left out (the daemon says which are required)."""
    kind = schema.get("type")
    if kind in ("confirm", "select", "rating"):
        return {"value": held.get("value")}
    values: dict[str, Any] = {}
    for spec in schema.get("fields", []):
        name, value = spec["name"], held.get(spec["name"])
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        values[name] = number(value) if spec["type"] == "number" else value
    return {"values": values}


def _radio(options: list[str], widget_id: str) -> RadioSet:
    return RadioSet(*(RadioButton(clean(o)) for o in options), id=widget_id)


class AnswerScreen(ModalScreen[bool]):
    """Answer one delivery; dismissed with True once the daemon took the answer."""

    BINDINGS = [
        Binding("ctrl+s", "send", "send", priority=True),
        Binding("escape", "close", "close"),
    ]

    def __init__(self, link: Link, item: dict[str, Any]) -> None:
        super().__init__()
        self.link = link
        self.item = item
        self.delivery: dict[str, Any] = item["delivery"]
        self.schema: dict[str, Any] = self.delivery.get("feedbackSchema") or {}

    # ---------------------------------------------------------------- building
    def compose(self) -> ComposeResult:
        d = self.delivery
        with VerticalScroll(id="answer"):
            yield Label(Text(clean(d.get("title", "")), style="bold"), id="answer-title")
            yield Static(
                Text(
                    f"{clean(self.item.get('repo', ''))} · {clean(d.get('id', ''))} · {d.get('mode')}"
                ),
                classes="dim",
            )
            body = (d.get("content") or {}).get("body") or ""
            if body:
                yield Static(Text(clean(body[:BODY_MAX], multiline=True)), id="answer-body")
            if not self.schema:
                yield Static(Text("a passive item: nothing to answer"), classes="dim")
                return
            if self.schema.get("prompt"):
                yield Label(Text(clean(self.schema["prompt"]), style="bold"))
            yield from self._widgets()
            yield Static("", id="error-value", classes="error")
            yield Label("note (optional)")
            yield Input(placeholder="sent with the answer", id="note")
            yield Static("", id="error-general", classes="error")
            with Horizontal(id="answer-buttons"):
                yield Button("send (ctrl+s)", id="send", variant="primary")
                yield Button("close (esc)", id="close")

    def _widgets(self) -> ComposeResult:
        s = self.schema
        kind = s.get("type")
        if kind == "confirm":
            yield _radio(
                [s.get("confirmLabel", "Confirm"), s.get("cancelLabel", "Cancel")], "value"
            )
        elif kind == "select" and s.get("multiple"):
            yield SelectionList[str](*((clean(o), o) for o in s.get("options", [])), id="value")
        elif kind == "select":
            yield _radio(list(s.get("options", [])), "value")
        elif kind == "rating":
            top = int(s.get("max", 5))
            if top <= RADIO_RATING_MAX:
                yield _radio([str(n) for n in range(1, top + 1)], "value")
            else:
                yield Input(placeholder=f"1 to {top}", type="integer", id="value")
        else:
            for spec in s.get("fields", []):
                yield from self._field(spec)

    def _field(self, spec: dict[str, Any]) -> ComposeResult:
        name, kind = spec["name"], spec["type"]
        label = clean(spec.get("label") or name) + (" *" if spec.get("required") else "")
        widget_id = f"field-{name}"
        if kind != "checkbox":
            yield Label(Text(label))
        if kind == "textarea":
            yield TextArea(id=widget_id, classes="textarea")
        elif kind == "select":
            yield _radio(list(spec.get("options") or []), widget_id)
        elif kind == "checkbox":
            yield Checkbox(Text(label), id=widget_id)
        else:
            yield Input(
                placeholder=clean(spec.get("placeholder") or ""),
                type="number" if kind == "number" else "text",
                id=widget_id,
            )
        yield Static("", id=f"error-values-{name}", classes="error")

    def on_mount(self) -> None:
        first = self.query("#value, RadioSet, Input, TextArea, Checkbox, SelectionList")
        if first:
            first.first().focus()

    # ---------------------------------------------------------------- reading
    def held(self) -> dict[str, Any]:
        """What each widget holds, by field name (``value`` for a one-widget answer)."""
        if self.schema.get("type") == "form":
            return {
                spec["name"]: self._value(self.query_one(f"#field-{spec['name']}"), spec)
                for spec in self.schema.get("fields", [])
            }
        return {"value": self._value(self.query_one("#value"), self.schema)}

    def _value(self, widget: Widget, spec: dict[str, Any]) -> Any:
        if isinstance(widget, RadioSet):
            index = widget.pressed_index
            if index < 0:
                return None
            kind = spec.get("type")
            if kind == "confirm":
                return index == 0
            if kind == "rating":
                return index + 1
            return list(spec.get("options") or [])[index]
        if isinstance(widget, SelectionList):
            return list(widget.selected)
        if isinstance(widget, Checkbox):
            return widget.value
        if isinstance(widget, TextArea):
            return widget.text
        if isinstance(widget, Input):
            if spec.get("type") == "rating":
                return number(widget.value) if widget.value.strip() else None
            return widget.value
        return None

    # ---------------------------------------------------------------- sending
    def action_close(self) -> None:
        self.dismiss(False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self.action_send()
        elif event.button.id == "close":
            self.action_close()

    def action_send(self) -> None:
        if not self.schema:
            return
        for error in self.query(".error").results(Static):
            error.update("")
        note = self.query_one("#note", Input).value.strip() or None
        self._send(answer_of(self.schema, self.held()), note)

    @work(thread=True, exclusive=True, group="answer")
    def _send(self, values: dict[str, Any], note: str | None) -> None:
        params: dict[str, Any] = {"id": self.delivery["id"], "values": values}
        if self.item.get("repo"):
            params["repo"] = self.item["repo"]
        if note:
            params["note"] = note
        try:
            self.link.call("inbox.answer", params)
        except RequestFailed as exc:
            field = exc.data.get("field") if isinstance(exc.data, dict) else None
            post(self, self._show_error, exc.message, field)
            return
        except (ClientError, OSError) as exc:
            post(self, self._show_error, str(exc).splitlines()[0], None)
            return
        # run by the app: a screen's dismiss from the screen's own handler pops twice
        post(self.app, self.dismiss, True)

    @on(Call)
    def _run_call(self, message: Call) -> None:
        message.run()

    def _show_error(self, message: str, field: str | None) -> None:
        target = f"#error-{field.replace('.', '-')}" if field else "#error-general"
        found = self.query(target)
        where = found.first(Static) if found else self.query_one("#error-general", Static)
        where.update(Text(clean(message)))
