"""The pure parts of ``pokeralph-acp``: inbox items as the editor's questions, prompts as
tasks, battle output as session updates."""

from __future__ import annotations

from typing import Any

from pokeralph_acp.agent import mine
from pokeralph_acp.asks import ask_for, command_for, message_for
from pokeralph_acp.prompts import task_of
from pokeralph_acp.updates import Translator


def delivery(schema: dict[str, Any] | None, kind: str = "user") -> dict[str, Any]:
    return {
        "id": "d_1700000000000_001",
        "title": "T",
        "mode": "blocking",
        "status": "awaiting_feedback",
        "content": {"type": "markdown", "body": "body"},
        "feedbackSchema": schema,
        "source": {"kind": kind, "taskId": "001-x"},
    }


def test_a_tool_permission_offers_allow_once_always_and_reject() -> None:
    ask = ask_for(
        delivery(
            {"type": "select", "prompt": "Allow?", "options": ["allow", "allow_always", "deny"]},
            "permission",
        )
    )
    assert ask is not None
    assert [o["kind"] for o in ask.options] == ["allow_once", "allow_always", "reject_once"]
    assert [ask.answers[o["optionId"]] for o in ask.options] == [
        {"value": "allow"},
        {"value": "allow_always"},
        {"value": "deny"},
    ]


def test_an_escalation_form_is_its_decision_and_a_planning_form_is_a_message() -> None:
    fields = [
        {
            "name": "action",
            "type": "select",
            "options": ["retry", "accept", "cancel"],
            "required": True,
        },
        {"name": "guidance", "type": "textarea"},
    ]
    ask = ask_for(delivery({"type": "form", "fields": fields}, "battle_escalation"))
    assert ask is not None
    assert [(o["name"], o["kind"]) for o in ask.options] == [
        ("retry", "allow_once"),
        ("accept", "allow_once"),
        ("cancel", "reject_once"),
    ]
    assert ask.answers["option-2"] == {"values": {"action": "cancel"}}
    questions = {"type": "form", "fields": [{"name": "q1", "type": "text", "required": True}]}
    item = delivery(questions, "planning")
    assert ask_for(item) is None
    assert "pokeralphctl --repo r answer d_1700000000000_001 --field q1=VALUE" in message_for(
        item, "r"
    )
    assert ask_for(delivery({"type": "rating"})) is None
    assert ask_for(delivery({"type": "select", "options": ["a", "b"], "multiple": True})) is None
    many = {"type": "select", "options": [str(n) for n in range(20)]}
    assert ask_for(delivery(many)) is None  # too many for a question: a message
    assert command_for(delivery({"type": "confirm"}), "my repo").startswith(
        "pokeralphctl --repo 'my repo' answer"
    )


def test_a_prompt_becomes_a_task() -> None:
    assert task_of("add a task: Fix the login\n\nIt fails.\n- logs in\n* keeps the session") == (
        "Fix the login",
        "Fix the login\n\nIt fails.\n- logs in\n* keeps the session",
        ["logs in", "keeps the session"],
    )
    title, _, criteria = task_of("# " + "word " * 100)
    assert len(title) <= 200 and title.endswith("…")
    assert criteria == [f"Done as asked: {title}"]


def test_only_the_battles_own_events_and_items_are_followed() -> None:
    assert mine({"type": "iteration_start", "taskId": "001-x", "payload": {}}, "001-x")
    assert not mine({"type": "iteration_start", "taskId": "002-y", "payload": {}}, "001-x")
    assert mine({"type": "new_delivery", "payload": {"delivery": delivery(None)}}, "001-x")


def test_tool_calls_open_and_close() -> None:
    t = Translator("t1")
    chunks = [
        {"kind": "tool_use", "text": "Bash: ls"},
        {"kind": "tool_result", "text": "a b"},
        {"kind": "tool_use", "text": "Edit: x.py"},
        {"kind": "tool_use", "text": "Read: y.py"},
        {"kind": "tool_error", "text": "no such file"},
    ]
    out = t.event({"type": "iteration_output", "payload": {"chunks": chunks}})
    assert [(u["sessionUpdate"], u.get("kind"), u.get("status")) for u in out] == [
        ("tool_call", "execute", "in_progress"),
        ("tool_call_update", None, "completed"),
        ("tool_call", "edit", "in_progress"),
        ("tool_call_update", None, "completed"),  # a new call closes the one before
        ("tool_call", "read", "in_progress"),
        ("tool_call_update", None, "failed"),
    ]
    assert len({u["toolCallId"] for u in out}) == 3
