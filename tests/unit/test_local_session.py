"""The local agent's files: the frozen v1 session and state load and round-trip; a
session past its message bound archives what it cuts, never separating a tool call
from its result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pokeralph_agent.session import (
    SESSION_KIND,
    Message,
    Session,
    SessionStore,
    ToolCall,
    ToolResult,
    trim,
)
from pokeralph_core import documents
from pokeralph_core.documents import DocumentKind
from pokeralph_core.local_defaults import STATE_KIND

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "v1" / "localagent"
KINDS: dict[str, DocumentKind[Any]] = {"session.json": SESSION_KIND, "localagent.json": STATE_KIND}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_frozen_files_load_and_round_trip(name: str, tmp_path: Path) -> None:
    kind = KINDS[name]
    raw = json.loads((FIXTURES / name).read_text())
    copy = tmp_path / name
    shutil.copy(FIXTURES / name, copy)
    loaded = documents.load(kind, copy)
    assert loaded is not None and loaded.version == raw["version"]
    assert json.loads(documents.encode_document(kind, loaded.value, loaded.version)) == raw
    assert documents.save(kind, copy, loaded.value) == raw["version"] + 1


def test_the_frozen_session_reads_as_the_seed_describes() -> None:
    loaded = documents.load(SESSION_KIND, FIXTURES / "session.json")
    assert loaded is not None
    session = loaded.value
    assert session.status == "paused" and session.model == "qwen2.5-coder:7b"
    call = session.messages[2].tool_calls[0]
    assert call.tool_name == "create_file" and call.status == "executed"
    assert session.messages[3].tool_call_id == call.id
    assert session.tool_results[0].files_affected == ["hello.py"]


def test_the_seed_rules_are_checked() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        Session(working_dir="relative", model="m")
    with pytest.raises(ValidationError):
        Session(working_dir="/w", model="")
    with pytest.raises(ValidationError, match="tool_call_id"):
        Message(role="tool", content="x")
    with pytest.raises(ValidationError, match="no tool_calls"):
        Message(role="user", content="x", tool_calls=[ToolCall(id="c", tool_name="read_file")])
    with pytest.raises(ValidationError, match="says its error"):
        ToolResult(tool_call_id="c", success=False)
    with pytest.raises(ValidationError, match="inside the working directory"):
        ToolResult(tool_call_id="c", success=True, files_affected=["../x"])


def _conversation(rounds: int) -> Session:
    session = Session(working_dir="/w", model="m")
    session.messages += [
        Message(role="system", content="sys"),
        Message(role="user", content="task"),
    ]
    for n in range(rounds):
        call = ToolCall(id=f"c{n}", tool_name="read_file", parameters={"path": f"{n}"})
        session.messages.append(Message(role="assistant", content="", tool_calls=[call]))
        session.messages.append(Message(role="tool", content=f"r{n}", tool_call_id=f"c{n}"))
        session.tool_results.append(ToolResult(tool_call_id=f"c{n}", success=True, output="r"))
    return session


def test_trimming_keeps_the_task_and_whole_tool_rounds(tmp_path: Path) -> None:
    session = _conversation(30)  # 62 messages
    store = SessionStore(tmp_path)
    cut, results = trim(session, 11)
    store.archive(session, cut, results)
    roles = [m.role for m in session.messages]
    assert roles[:2] == ["system", "user"] and len(roles) <= 11
    assert roles[2] == "assistant"  # never a tool result without its call
    assert len(session.tool_results) == 11
    assert session.archived_messages == 62 - len(roles) and session.archived_tool_results == 19
    archived = [
        json.loads(line) for line in store.archive_path(session.id).read_text().splitlines()
    ]
    assert len(archived) == session.archived_messages + session.archived_tool_results
    assert archived[0] == {**archived[0], "kind": "message", "role": "assistant"}


def test_the_latest_session_of_a_folder(tmp_path: Path) -> None:
    store = SessionStore.for_directory(tmp_path, Path("/some/work"))
    assert store.latest() is None
    first, second = Session(working_dir="/w", model="m"), Session(working_dir="/w", model="m")
    store.save(first)
    store.save(second)
    latest = store.latest()
    assert latest is not None and latest.id == second.id
    other = SessionStore.for_directory(tmp_path, Path("/other"))
    assert other.folder != store.folder and other.latest() is None


def test_a_rule_the_user_wrote_without_an_id_is_not_added_again(tmp_path: Path) -> None:
    """Rules offered on the user's behalf (the local agent's defaults, "allow always" at
    its terminal) skip one the user already has, also when written by hand without an id
    (it is derived): appended again, the layer would hold the id twice and be refused."""
    from pokeralph_core.approval import ApprovalRule
    from pokeralph_core.config import layers as config_layers
    from pokeralphd.store.rules import add_to_user_layer

    by_hand = {
        "toolName": "Bash",
        "paramPattern": "^make$",
        "decision": "allow",
        "description": "d",
    }
    user = tmp_path / "config.json"
    user.write_text(json.dumps({"schemaVersion": 1, "version": 1, "approvalRules": [by_hand]}))
    same = ApprovalRule.model_validate(by_hand)
    other = ApprovalRule.model_validate({**by_hand, "paramPattern": "^make test$"})
    assert add_to_user_layer(user, [same, other]) == [other.id]
    assert add_to_user_layer(user, [same, other]) == []
    rules = config_layers.load(user, None).config.approval_rules
    assert [r.id for r in rules] == [same.id, other.id]
