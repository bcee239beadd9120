"""The backends' parsers on the real tools' lines (../shared/AGENT-FORMATS.md)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pokeralphd.agents.base import (
    AgentNotice,
    AgentRateLimit,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
)
from pokeralphd.agents.claude import ClaudeBackend
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.agents.command import CommandBackend
from pokeralphd.domain.models import AgentConfig


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_claude_events() -> None:
    b = ClaudeBackend()
    assert b.parse_line(
        line({"type": "system", "subtype": "init", "session_id": "s1", "model": "m"})
    ) == [AgentStarted("s1", "m", 0)]
    assistant = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls -la"}},
            ]
        },
    }
    assert b.parse_line(line(assistant)) == [AgentText("hi"), AgentToolUse("Bash", "ls -la")]
    user = {
        "type": "user",
        "message": {
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "<promise>COMPLETE</promise>"}],
                    "is_error": True,
                }
            ]
        },
    }
    assert b.parse_line(line(user)) == [AgentToolResult("<promise>COMPLETE</promise>", True)]
    limit = {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1785993600,
            "rateLimitType": "five_hour",
        },
    }
    assert b.parse_line(line(limit)) == [AgentRateLimit("rejected", 1785993600.0, "five_hour")]
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": "Invalid API key",
        "session_id": "s1",
        "total_cost_usd": 0.04,
        "num_turns": 6,
        "duration_ms": 15000,
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }
    (parsed,) = b.parse_line(line(result))
    assert isinstance(parsed, AgentResult) and parsed.is_error and parsed.cost_usd == 0.04
    assert parsed.usage is not None and parsed.usage.output_tokens == 50
    assert b.parse_line(line({"type": "system", "subtype": "hook_started"})) == []
    assert isinstance(b.parse_line(line({"type": "shiny_new"}))[0], AgentNotice)
    assert isinstance(b.parse_line(b"not json")[0], AgentNotice)
    assert isinstance(b.parse_line(line({"type": "assistant", "message": "weird"}))[0], AgentNotice)


@given(st.binary(max_size=300))
def test_parsers_never_raise(data: bytes) -> None:
    for backend in (ClaudeBackend(), CodexBackend(), CommandBackend()):
        backend.parse_line(data)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["type", "message", "content", "item", "result", "usage", "text"]),
                c,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_parsers_never_raise_on_json(value: object) -> None:
    for backend in (ClaudeBackend(), CodexBackend()):
        backend.parse_line(line(value))


def test_codex_events() -> None:
    b = CodexBackend()
    events = [
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {
                "id": "1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "a\nb",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"id": "2", "type": "agent_message", "text": "Done."}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
        },
    ]
    parsed = [e for ev in events for e in b.parse_line(line(ev))]
    assert parsed[0] == AgentStarted("th", None, 0)
    assert (
        AgentToolUse("shell", "bash -lc ls") in parsed and AgentToolResult("a\nb", False) in parsed
    )
    result = parsed[-1]
    assert isinstance(result, AgentResult) and result.text == "Done." and result.usage is not None
    assert result.usage.cache_read_input_tokens == 24448 and result.cost_usd is None
    (failed,) = b.parse_line(line({"type": "turn.failed", "error": {"message": "boom"}}))
    assert isinstance(failed, AgentResult) and failed.is_error and failed.text == "boom"


def request(**config: object) -> AgentRequest:
    return AgentRequest(
        prompt="PROMPT", cwd=Path("."), mode="execute", config=AgentConfig.model_validate(config)
    )


def test_argv() -> None:
    claude = ClaudeBackend().argv(request(model="opus", extraArgs=["--add-dir", "/x"]))
    assert claude[:7] == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
    ]
    assert claude[-4:] == ["--model", "opus", "--add-dir", "/x"] and "PROMPT" not in claude
    plan = AgentRequest(
        prompt="P", cwd=Path("."), mode="plan", config=AgentConfig(), resume_session="abc"
    )
    argv = ClaudeBackend().argv(plan)
    assert (
        argv[argv.index("--permission-mode") + 1] == "plan"
        and argv[argv.index("--resume") + 1] == "abc"
    )
    assert ClaudeBackend().stdin_bytes(request()) == b"PROMPT"
    as_arg = request(promptVia="argument")
    assert (
        ClaudeBackend().argv(as_arg)[-1] == "PROMPT" and ClaudeBackend().stdin_bytes(as_arg) is None
    )
    assert (
        CodexBackend().argv(request())[:3] == ["codex", "exec", "--json"]
        and CodexBackend().argv(request())[-1] == "-"
    )
    assert CommandBackend().argv(request(backend="command", command="/bin/agent")) == ["/bin/agent"]
