"""Seed 001's tool-call lifecycle, recorded from an agent's events."""

from __future__ import annotations

from pathlib import Path

from pokeralphd.agents.base import (
    AgentEvent,
    AgentPermissionDecision,
    AgentPermissionDenied,
    AgentPermissionRequest,
    AgentToolResult,
    AgentToolUse,
    PermissionAnswer,
)
from pokeralphd.agents.claude import ClaudeBackend
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.battle.toolcalls import ToolCallLog
from pokeralphd.domain.models import MAX_TOOL_CALLS, TOOL_OUTPUT_KEPT, Iteration

ROOT = Path("/work/repo")


def _ask(tool_use_id: str, tool: str = "Bash") -> AgentPermissionRequest:
    return AgentPermissionRequest(
        "req-" + tool_use_id, tool, {"command": "make test"}, "", tool_use_id
    )


def test_each_path_through_the_lifecycle() -> None:
    log = ToolCallLog(ROOT)
    events: list[AgentEvent] = [
        # ran without an ask: approved by the agent itself
        AgentToolUse("Write", "a.txt", "t1", {"file_path": "/work/repo/src/a.txt", "content": "x"}),
        AgentToolResult("written", False, "t1"),
        # allowed by a rule, then failed
        AgentToolUse("Bash", "make test", "t2", {"command": "make test"}),
        AgentPermissionDecision(
            _ask("t2"), PermissionAnswer(True, method="config_rule", rule_id="r-1")
        ),
        AgentToolResult("2 failed", True, "t2"),
        # denied by a person: the tool's result is the denial, not an execution
        AgentToolUse("Bash", "rm -rf x", "t3", {"command": "rm -rf x"}),
        AgentPermissionDecision(_ask("t3"), PermissionAnswer(False, "no", method="manual")),
        AgentToolResult("no", True, "t3"),
        # refused by the agent on its own, nobody asked
        AgentToolUse("Bash", "python3 -c 1", "t4", {"command": "python3 -c 1"}),
        AgentPermissionDenied("Bash", "t4", "This command requires approval"),
        AgentToolResult("This command requires approval", True, "t4"),
        # the result event lists the refusals again: no second record, no change
        AgentPermissionDenied("Bash", "t3", ""),
        AgentPermissionDenied("Bash", "t4", ""),
        # a writing tool naming a path outside the repository affects nothing we track
        AgentToolUse("Edit", "x", "t5", {"file_path": "../../etc/passwd"}),
        AgentToolResult("ok", False, "t5"),
        # a call still waiting when the run ended stays pending
        AgentToolUse("Read", "a.txt", "t6", {"file_path": "a.txt"}),
    ]
    for event in events:
        log.on_event(event)
    calls = {c.id: c for c in log.records()}
    assert list(calls) == ["t1", "t2", "t3", "t4", "t5", "t6"]

    assert calls["t1"].status == "executed" and calls["t1"].approval_method == "auto"
    assert calls["t1"].result is not None and calls["t1"].result.files_affected == ["src/a.txt"]
    assert calls["t2"].status == "failed" and calls["t2"].approval_method == "config_rule"
    assert calls["t2"].rule_id == "r-1"
    assert calls["t2"].result is not None and calls["t2"].result.error == "2 failed"
    assert calls["t3"].status == "rejected" and calls["t3"].approval_method == "manual"
    assert calls["t3"].message == "no" and calls["t3"].result is None
    assert calls["t4"].status == "rejected" and calls["t4"].approval_method == "auto"
    assert calls["t4"].message == "This command requires approval"
    assert calls["t5"].result is not None and calls["t5"].result.files_affected == []
    assert calls["t6"].status == "pending"
    assert calls["t2"].input == '{"command":"make test"}'
    # The records fit the iteration document (its validation included).
    Iteration.model_validate(
        {
            "number": 1,
            "startedAt": "2026-11-23T00:00:00Z",
            "result": "success",
            "toolCalls": [c.dump() for c in calls.values()],
        }
    )


def test_bounded_in_count_and_size() -> None:
    log = ToolCallLog(ROOT)
    for n in range(MAX_TOOL_CALLS + 7):
        log.on_event(AgentToolUse("Read", "f", f"t{n}", {"file_path": "f"}))
        log.on_event(AgentToolResult("x" * 50_000, False, f"t{n}"))
    records = log.records()
    assert len(records) == MAX_TOOL_CALLS and log.omitted == 7
    output = records[0].result.output if records[0].result else ""
    assert len(output) < TOOL_OUTPUT_KEPT + 100 and "more characters in the log" in output


def test_claude_events_carry_ids_and_denials() -> None:
    backend = ClaudeBackend()
    [use] = backend.parse_line(
        b'{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}'
    )
    assert isinstance(use, AgentToolUse) and use.id == "toolu_1" and use.input == {"command": "ls"}
    [result] = backend.parse_line(
        b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x","is_error":false}]}}'
    )
    assert isinstance(result, AgentToolResult) and result.tool_use_id == "toolu_1"
    # As the real CLI 2.1.330 prints it when nobody is asked (tests/fakes/CLAUDE-PERMISSIONS.md).
    [denied] = backend.parse_line(
        b'{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"toolu_2",'
        b'"decision_reason_type":"other","decision_reason":"This command requires approval",'
        b'"message":"This command requires approval","session_id":"s"}'
    )
    assert denied == AgentPermissionDenied("Bash", "toolu_2", "This command requires approval")
    events = backend.parse_line(
        b'{"type":"result","subtype":"success","is_error":false,"result":"done","permission_denials":'
        b'[{"tool_name":"Bash","tool_use_id":"toolu_2","tool_input":{"command":"x"}}, 7]}'
    )
    assert events[0] == AgentPermissionDenied("Bash", "toolu_2", "")
    assert len(events) == 2


def test_codex_items_become_calls() -> None:
    backend = CodexBackend()
    log = ToolCallLog(ROOT)
    for line in (
        b'{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"pytest","status":"in_progress"}}',
        b'{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"pytest","aggregated_output":"ok","exit_code":0,"status":"completed"}}',
        b'{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"src/x.py","kind":"add"}],"status":"completed"}}',
    ):
        for event in backend.parse_line(line):
            log.on_event(event)
    calls = log.records()
    assert [(c.tool_name, c.status) for c in calls] == [
        ("shell", "executed"),
        ("file_change", "executed"),
    ]
    assert calls[1].result is not None and calls[1].result.files_affected == ["src/x.py"]


def test_a_control_response_is_not_output() -> None:
    line = b'{"type":"control_response","response":{"subtype":"success","request_id":"init-1","response":{}}}'
    assert ClaudeBackend().parse_line(line) == []
