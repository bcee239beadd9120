"""The real Claude Code CLI's permission channel in print mode, against a scripted API.

Facts these tests pin down are written up in tests/fakes/CLAUDE-PERMISSIONS.md.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

from tests.fakes.messages_api import ApiError, MessagesAPI, Text, ToolUse, result_text
from tests.real.conftest import allow, claude_env, deny, drive

if TYPE_CHECKING:
    from pathlib import Path

TOUCH = {"command": "touch made-by-bash.txt", "description": "Create a file"}
FORBIDDEN = {"command": "touch forbidden.txt", "description": "Create another file"}


def _can_use_tool(run_requests: list[dict[str, Any]], tool_use_id: str) -> dict[str, Any]:
    """The one ``can_use_tool`` request for the call ``tool_use_id``."""
    asks = [
        r
        for r in run_requests
        if r["request"].get("subtype") == "can_use_tool"
        and r["request"].get("tool_use_id") == tool_use_id
    ]
    assert len(asks) == 1, run_requests
    return asks[0]


def test_deny_reaches_the_model_as_an_error_tool_result_and_allow_runs_the_next_command(
    claude_bin: Path, repo: Path, claude_home: Path
) -> None:
    """One run, two asks: the first command denied (the model gets our message as an error
    tool result and goes on), the second allowed (it runs and the API gets its result)."""
    denied = ToolUse("Bash", FORBIDDEN)
    tool = ToolUse("Bash", TOUCH, text="Creating it.")
    message = "pokeralph: Bash(touch) is not allowed in this battle"

    def decide(request: dict[str, Any]) -> dict[str, Any]:
        return (deny(message) if request["input"] == FORBIDDEN else allow)(request)

    with MessagesAPI([denied, tool, Text("Finished.")]) as api:
        run = drive(claude_bin, api, repo, claude_home, "create the file", decide)

    asks = [r for r in run.control_requests if r["request"].get("subtype") == "can_use_tool"]
    assert len(asks) == 2, run.control_requests
    # The denied command: not run, our message reaches the model as an error tool result.
    _can_use_tool(run.control_requests, denied.id)
    assert not (repo / "forbidden.txt").exists()
    results = api.tool_results()
    assert [r["tool_use_id"] for r in results] == [denied.id, tool.id]
    assert results[0]["is_error"] is True
    assert result_text(results[0]) == message
    # The CLI prints the same tool result, and lists the denial in its result event.
    printed = [
        b
        for e in run.of_type("user")
        for b in e["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert printed and printed[0]["is_error"] is True and printed[0]["content"] == message
    assert run.result["permission_denials"] == [
        {"tool_name": "Bash", "tool_use_id": denied.id, "tool_input": FORBIDDEN}
    ]

    # The allowed command.
    ask = _can_use_tool(run.control_requests, tool.id)
    assert isinstance(ask["request_id"], str) and ask["request_id"]
    request = ask["request"]
    assert request["tool_name"] == "Bash"
    assert request["input"] == TOUCH
    assert request["tool_use_id"] == tool.id
    # Our answer went back in the SDK's envelope.
    answer = next(
        m
        for m in run.sent
        if m["type"] == "control_response" and m["response"]["request_id"] == ask["request_id"]
    )
    assert answer["response"]["response"]["behavior"] == "allow"

    assert (repo / "made-by-bash.txt").exists()
    assert not results[1].get("is_error")
    assert run.returncode == 0
    assert run.result["subtype"] == "success"
    assert run.result["is_error"] is False
    assert run.result["result"] == "Finished."


def test_closed_stdin_fails_the_permission_request(
    claude_bin: Path, repo: Path, claude_home: Path
) -> None:
    """Why stdin must stay open: with the prompt sent and stdin closed, the ask fails."""
    tool = ToolUse("Bash", TOUCH)
    with MessagesAPI([tool, Text("Finished.")]) as api:
        line = json.dumps(
            {
                "type": "user",
                "message": {"role": "user", "content": "create the file"},
                "parent_tool_use_id": None,
                "session_id": "",
            }
        )
        proc = subprocess.run(
            [
                str(claude_bin),
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-prompt-tool",
                "stdio",
            ],
            input=line + "\n",
            capture_output=True,
            text=True,
            cwd=repo,
            env=claude_env(api, claude_home),
            timeout=60,
        )
    assert not (repo / "made-by-bash.txt").exists()
    results = api.tool_results()
    assert len(results) == 1 and results[0]["is_error"] is True
    assert "Stream closed" in result_text(results[0])
    assert proc.returncode == 0


def test_429_is_a_result_with_is_error_and_the_status(
    claude_bin: Path, repo: Path, claude_home: Path
) -> None:
    message = "Number of request tokens has exceeded your per-minute rate limit"
    # x-should-retry: false stops the CLI's ten retries with backoff (about three minutes).
    error = ApiError(429, "rate_limit_error", message, {"x-should-retry": "false"}, sticky=True)
    with MessagesAPI([error]) as api:
        run = drive(claude_bin, api, repo, claude_home, "say hi", allow)

    assert run.returncode == 1
    assert run.control_requests == []
    assert run.of_type("rate_limit_event") == []  # API-key auth: none
    text = f"API Error: Request rejected (429) · {message}"
    synthetic = run.of_type("assistant")[-1]
    assert synthetic["message"]["model"] == "<synthetic>"
    assert synthetic["message"]["content"] == [{"type": "text", "text": text}]
    assert synthetic["is_api_error_message"] is True
    assert synthetic["error"] == "rate_limit"
    assert synthetic["api_error_status"] == 429
    result = run.result
    assert result["subtype"] == "success"
    assert result["is_error"] is True
    assert result["result"] == text
    assert result["api_error_status"] == 429
    assert result["api_error_type"] == "rate_limit_error"
    assert result["terminal_reason"] == "api_error"
    assert result["total_cost_usd"] == 0
    assert len(api.message_requests()) == 1
