"""Battle commands: the params each builds, approval answers, event lines, and a real start."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.cli import build_parser, command_of
from pokeralphctl.commands import Context
from pokeralphctl.commands.battle import approve_params, control_params, log_params, start_params
from pokeralphctl.commands.config import nested_patch, parse_value, split_key
from pokeralphctl.commands.follow import next_offset, parse_answer
from pokeralphctl.commands.render import render
from pokeralphctl.output import Output
from pokeralphctl.terminal import Terminal
from tests.cli.conftest import Ctl, envelope
from tests.helpers import FAKES


def parse(*argv: str) -> tuple[Context, Any]:
    parser, _ = build_parser(list(argv))
    args = parser.parse_args(list(argv))
    stdout, stderr = io.StringIO(), io.StringIO()
    out = Output(json_mode=args.json, stdout=stdout, stderr=stderr)
    term = Terminal({}, "/work/repo", io.StringIO(), stdout, stderr)
    return Context(term, out, "/work/repo", False), args


def test_battle_start_params() -> None:
    ctx, args = parse("battle", "start", "001-x", "--yolo", "--max-iterations", "3")
    assert start_params(ctx, args) == {
        "taskId": "001-x",
        "mode": "yolo",
        "maxIterations": 3,
        "repo": "/work/repo",
    }
    ctx, args = parse("battle", "start", "001-x", "--hitl", "--follow")
    assert args.follow and start_params(ctx, args)["mode"] == "hitl"
    ctx, args = parse("battle", "start", "001-x")
    assert start_params(ctx, args) == {"taskId": "001-x", "repo": "/work/repo"}
    with pytest.raises(SystemExit):
        parse("battle", "start", "001-x", "--yolo", "--hitl")


def test_control_and_approve_params() -> None:
    ctx, args = parse("battle", "pause", "--now")
    assert (args.method, control_params(ctx, args)) == (
        "battle.pause",
        {"now": True, "repo": "/work/repo"},
    )
    ctx, args = parse("battle", "cancel", "001-x")
    assert (args.method, control_params(ctx, args)) == (
        "battle.cancel",
        {"taskId": "001-x", "repo": "/work/repo"},
    )
    ctx, args = parse("battle", "resume")
    assert args.method == "battle.resume"
    ctx, args = parse("approve")
    assert approve_params(ctx, args) == {"approve": True, "repo": "/work/repo"}
    ctx, args = parse("battle", "approve", "001-x", "--reject", "--note", "use a table")
    assert approve_params(ctx, args) == {
        "approve": False,
        "note": "use a table",
        "taskId": "001-x",
        "repo": "/work/repo",
    }
    ctx, args = parse("battle", "log", "001-x", "-n", "20", "--iteration", "2")
    assert log_params(args, ctx) == {
        "taskId": "001-x",
        "iteration": 2,
        "tail": 20,
        "repo": "/work/repo",
    }


def test_global_options_anywhere() -> None:
    assert command_of(["--socket", "/s", "--repo", "r", "task", "list"]) == "task"
    assert command_of(["--json"]) is None
    _, args = parse("--repo", "r", "task", "list", "--json")
    assert (args.repo, args.json) == ("r", True)
    _, args = parse("--json", "task", "list")
    assert args.json is True


def test_config_helpers() -> None:
    assert split_key("agent.extra_args") == ["agent", "extraArgs"]
    assert nested_patch(["agent", "backend"], "demo") == {"agent": {"backend": "demo"}}
    assert parse_value("5") == 5 and parse_value("true") is True
    assert parse_value('["a"]') == ["a"] and parse_value("demo") == "demo"
    assert parse_value("null") is None


def test_approval_answers() -> None:
    assert parse_answer("y") == (True, None)
    assert parse_answer("YES") == (True, None)
    assert parse_answer("n") == (False, None)
    assert parse_answer("  ") is None
    assert parse_answer("also add a test") == (True, "also add a test")
    assert next_offset({"offset": 4, "data": "é", "size": 10}) == 6
    assert next_offset({"offset": 4, "data": "é", "nextOffset": 9, "size": 10}) == 9


def event(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": 1,
        "type": kind,
        "repo": "shop",
        "taskId": "001-x",
        "payload": payload,
        "timestamp": "2025-01-01T12:00:00.000Z",
    }


def test_event_lines() -> None:
    out = Output(stdout=io.StringIO(), stderr=io.StringIO())
    chunks = [
        {"kind": "text", "text": "Looking at the code\nFound it"},
        {"kind": "tool_use", "text": "Edit src/app.py"},
        {"kind": "tool_result", "text": "ok"},
    ]
    lines = render(out, event("iteration_output", {"iteration": 1, "chunks": chunks}))
    assert [line.split(" ", 4)[-1] for line in lines] == [
        "Looking at the code",
        "Found it",
        "→ Edit src/app.py",
    ]
    assert lines[0].split()[1:4] == ["shop", "001-x", "output"]
    out.verbose = 1
    lines = render(out, event("iteration_output", {"iteration": 1, "chunks": chunks}))
    assert lines[-1].endswith("← ok")
    (line,) = render(
        out,
        event(
            "iteration_end",
            {
                "iteration": 2,
                "result": "success",
                "durationMs": 1500,
                "costUsd": 0.25,
                "battleCostUsd": 0.5,
                "filesChanged": ["a", "b"],
                "commitHash": "0123456789abcdef",
                "error": None,
                "feedback": {"test": True, "lint": False},
            },
        ),
    )
    assert "iteration 2: success, 1.5s, $0.25 (battle $0.50), 2 files, commit 01234567" in line
    assert "test ok lint FAILED" in line
    (line,) = render(out, event("await_approval", {"iteration": 3, "result": "success"}))
    assert "pokeralphctl battle approve" in line
    (line,) = render(out, event("battle_complete", {"iterations": 3, "costUsd": 1.0}))
    assert line.endswith("battle_complete complete after 3 iterations, $1.00")
    (line,) = render(out, event("something_new", {"x": 1}))
    assert line.endswith('something_new {"x":1}')
    out.verbose = 0
    assert render(out, event("progress_update", {"progress": {}})) == []


def test_battle_start_follow_and_revert_against_a_real_daemon(ctl: Ctl, registered: Path) -> None:
    ctl("task", "add", "Battle me", "-d", "d", "-c", "c")
    for key, value in (
        ("agent.backend", "claude"),
        ("agent.command", str(FAKES / "fake_claude")),
        ("agent.env.FAKE_CLAUDE_MODE", "complete"),
        ("phases", "implementation"),
        ("feedbackLoops", "none"),
    ):
        assert ctl("config", "set", key, value).returncode == 0, key
    proc = ctl("battle", "start", "001-battle-me", "--yolo", "--max-iterations", "1", "--follow")
    assert proc.returncode == 0, proc.stderr
    battle = envelope(ctl("battle", "history", "001-battle-me", "--json"))["result"]["battle"]
    assert battle["status"] == "completed"
    committed = [i["commitHash"] for i in battle["iterations"] if i.get("commitHash")]
    assert committed
    reverted = ctl("battle", "revert", "001-battle-me")
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout.startswith("reverted the last commit of 001-battle-me: ")
    again = envelope(ctl("battle", "revert", "001-battle-me", "--json"))
    assert not again["ok"] and "not a PokéRalph commit" in again["error"]["message"]


def test_history_shows_tool_calls_and_how_each_was_decided() -> None:
    from pokeralphctl.commands.battle import call_line, tools_cell

    out = Output(json_mode=False, stdout=io.StringIO(), stderr=io.StringIO())
    calls: list[dict[str, Any]] = [
        {
            "toolName": "Bash",
            "input": '{"command":"make test"}',
            "status": "executed",
            "approvalMethod": "config_rule",
            "ruleId": "r-1a2b3c4d",
            "result": {"success": True},
        },
        {
            "toolName": "Bash",
            "input": '{"command":"rm -rf /"}',
            "status": "rejected",
            "approvalMethod": "manual",
            "message": "no\x1b[2J way",
        },
        {
            "toolName": "Write",
            "input": '{"file_path":"a.txt"}',
            "status": "executed",
            "approvalMethod": "auto",
            "result": {"success": True, "filesAffected": ["a.txt"]},
        },
    ]
    assert tools_cell({"toolCalls": calls, "toolCallsOmitted": 2}) == "5 (1 denied)"
    assert tools_cell({}) == "0"
    lines = [call_line(out, c) for c in calls]
    assert lines[0] == 'executed by rule r-1a2b3c4d: Bash {"command":"make test"}'
    assert lines[1].startswith("rejected by a person: Bash") and "\x1b" not in lines[1]
    assert lines[2].endswith("· a.txt") and "executed automatically:" in lines[2]
