"""An inbox item as the editor's own question: ``session/request_permission``, or a message.

ACP asks a person one thing: pick one of a few options, each of a kind (``allow_once``,
``allow_always``, ``reject_once``, ``reject_always``). What fits that question:

- a **confirm** item (a HITL iteration approval): its confirm label as ``allow_once``, its
  cancel label as ``reject_once``; answered ``{"value": true|false}``;
- a **permission** item (an agent's tool call, options allow / allow_always / deny):
  ``allow_once``, ``allow_always``, ``reject_once``; answered ``{"value": OPTION}``;
- any other single **select** (a failed battle's retry or stop, a budget's go on or
  stop) of at most :data:`MAX_OPTIONS` options: each option, ``reject_once`` for the
  ones that stop, deny or cancel, else ``allow_once``;
- a **form** whose only required field is a select and whose other fields may stay empty
  (an escalation: retry / accept / cancel, guidance optional): that select's options,
  answered ``{"values": {FIELD: OPTION}}``.

Anything else (a planning question's text fields, a rating, a multiple choice) is shown
as a message with the ``pokeralphctl inbox answer`` command that answers it. Pure
functions: no I/O here.
"""

from __future__ import annotations

import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The most options put to the editor in one question (more: a message instead).
MAX_OPTIONS = 8
#: The longest item body put into the question or the message.
MAX_BODY = 8000
#: Option words that stop rather than go on.
REJECTING = ("stop", "deny", "reject", "cancel", "no")
PERMISSION_KINDS = {"allow": "allow_once", "allow_always": "allow_always", "deny": "reject_once"}


class Ask:
    """How to put one delivery to the editor: its options and the answer each one gives."""

    def __init__(self, options: list[dict[str, str]], answers: dict[str, dict[str, Any]]):
        #: ACP PermissionOption objects (``optionId``, ``name``, ``kind``)
        self.options = options
        #: the ``inbox.answer`` values of each option id
        self.answers = answers


def _kind(option: str) -> str:
    words = option.lower().split()
    return "reject_once" if words and words[0] in REJECTING else "allow_once"


def _choices(options: list[Any], kinds: dict[str, str] | None, answer: Any) -> Ask | None:
    if not options or len(options) > MAX_OPTIONS or not all(isinstance(o, str) for o in options):
        return None
    acp_options, answers = [], {}
    for n, option in enumerate(options):
        oid = f"option-{n}"
        kind = (kinds or {}).get(option) or _kind(option)
        acp_options.append({"optionId": oid, "name": option, "kind": kind})
        answers[oid] = answer(option)
    return Ask(acp_options, answers)


def ask_for(delivery: dict[str, Any]) -> Ask | None:
    """The question for ``delivery`` (a Delivery document), or None: show it as a message."""
    schema = delivery.get("feedbackSchema")
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    source = delivery.get("source") or {}
    if kind == "confirm":
        yes = str(schema.get("confirmLabel") or "Confirm")
        no = str(schema.get("cancelLabel") or "Cancel")
        return Ask(
            [
                {"optionId": "confirm", "name": yes, "kind": "allow_once"},
                {"optionId": "cancel", "name": no, "kind": "reject_once"},
            ],
            {"confirm": {"value": True}, "cancel": {"value": False}},
        )
    if kind == "select" and not schema.get("multiple"):
        kinds = PERMISSION_KINDS if source.get("kind") == "permission" else None
        return _choices(list(schema.get("options") or []), kinds, lambda o: {"value": o})
    if kind == "form":
        fields = [f for f in schema.get("fields") or [] if isinstance(f, dict)]
        required = [f for f in fields if f.get("required")]
        if len(required) == 1 and required[0].get("type") == "select":
            name = required[0].get("name")
            return _choices(
                list(required[0].get("options") or []), None, lambda o: {"values": {name: o}}
            )
    return None


def body_of(delivery: dict[str, Any]) -> str:
    body = str((delivery.get("content") or {}).get("body") or "")
    if len(body) > MAX_BODY:
        body = body[:MAX_BODY] + f"\n\n[… {len(body) - MAX_BODY} more characters: see the inbox]"
    return body


def command_for(delivery: dict[str, Any], repo: str) -> str:
    """The ``pokeralphctl`` command line that answers ``delivery`` in a terminal."""
    base = f"pokeralphctl --repo {shlex.quote(repo)} answer {shlex.quote(str(delivery['id']))}"
    schema = delivery.get("feedbackSchema") or {}
    kind = schema.get("type")
    if kind == "confirm":
        return f"{base} --yes  (or --no)"
    if kind == "select":
        first = (schema.get("options") or ["OPTION"])[0]
        more = " (repeat --value for several)" if schema.get("multiple") else ""
        return f"{base} --value {shlex.quote(str(first))}{more}"
    if kind == "rating":
        return f"{base} --rating N  (1..{schema.get('max', 5)})"
    if kind == "form":
        fields = " ".join(
            f"--field {shlex.quote(str(f.get('name')))}=VALUE"
            for f in schema.get("fields") or []
            if isinstance(f, dict)
        )
        return f"{base} {fields}"
    return base  # asks interactively


def message_for(delivery: dict[str, Any], repo: str) -> str:
    """A delivery shown as a message: its title, body and the command that answers it."""
    lines = [f"**Waiting for you: {delivery.get('title', '')}**", ""]
    body = body_of(delivery)
    if body:
        lines += [body, ""]
    lines += [
        "Answer it in a terminal (or the dashboard):",
        "",
        "```",
        command_for(delivery, repo),
        "```",
        "",
    ]
    return "\n".join(lines)
