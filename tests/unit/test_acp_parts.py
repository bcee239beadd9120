"""The parts of the acp backend that need no process: a user's flags replacing our
defaults (every backend), the presets' command lines, the JSON-RPC peer's bounds, and
what ACP's messages mean to pokeralph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralph_core.approval import ApprovalRule
from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents import get_backend
from pokeralphd.agents.acp_map import ToolCalls, choose_option, result_of
from pokeralphd.agents.acp_rpc import MAX_INBOUND, Peer, PeerClosed
from pokeralphd.agents.base import (
    AgentNotice,
    AgentRequest,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    Flag,
    PermissionAnswer,
    merge_flags,
)
from pokeralphd.agents.claude import ClaudeBackend
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.childlines import MAX_LINE
from pokeralphd.errors import AgentError


def request(mode: str = "execute", **config: object) -> AgentRequest:
    return AgentRequest(
        prompt="PROMPT",
        cwd=Path("."),
        mode="plan" if mode == "plan" else "execute",
        config=AgentConfig.model_validate(config),
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--sandbox", "danger-full-access"],
        ["--sandbox=danger-full-access"],
        ["-s", "danger-full-access"],
        ["-sdanger-full-access"],
    ],
)
def test_a_users_codex_sandbox_replaces_ours(extra: list[str]) -> None:
    """The real Codex CLI exits 2 ("cannot be used multiple times") when both are given."""
    argv = CodexBackend().argv(request(backend="codex", extraArgs=extra))
    given = [a for a in argv if a in ("--sandbox", "-s") or a.startswith(("--sandbox=", "-s"))]
    assert given == extra[:1]
    assert "workspace-write" not in argv
    assert argv[-1] == "-"


def test_our_defaults_stay_when_the_user_gives_other_flags() -> None:
    argv = CodexBackend().argv(request(backend="codex", model="m1", extraArgs=["-c", "x=1"]))
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("-m") + 1] == "m1"
    argv = CodexBackend().argv(request(backend="codex", model="m1", extraArgs=["--model", "m2"]))
    assert "-m" not in argv and argv[argv.index("--model") + 1] == "m2"


def test_a_users_claude_permission_mode_replaces_ours() -> None:
    argv = ClaudeBackend().argv(request(extraArgs=["--permission-mode=bypassPermissions"]))
    assert "acceptEdits" not in argv and argv.count("--permission-mode") == 0
    assert "--permission-mode=bypassPermissions" in argv


def test_merge_flags_reads_options_up_to_a_double_dash() -> None:
    defaults = [Flag(("--mode", "-m"), ("a",)), Flag(("--quiet",))]
    assert merge_flags(defaults, []) == ["--mode", "a", "--quiet"]
    assert merge_flags(defaults, ["--", "--mode", "b"]) == [
        "--mode",
        "a",
        "--quiet",
        "--",
        "--mode",
        "b",
    ]
    assert merge_flags(defaults, ["-mb", "--quiet"]) == ["-mb", "--quiet"]


def test_presets_start_each_cli_in_its_acp_mode() -> None:
    gemini = get_backend(AgentConfig(backend="gemini", model="gemini-2.5-flash"))
    assert gemini.argv(request(backend="gemini", model="gemini-2.5-flash")) == [
        "gemini",
        "--acp",
        "--approval-mode",
        "default",
        "-m",
        "gemini-2.5-flash",
    ]
    assert get_backend(AgentConfig(backend="qwen")).argv(request("plan", backend="qwen")) == [
        "qwen",
        "--acp",
        "--approval-mode",
        "plan",
    ]
    assert get_backend(AgentConfig(backend="opencode")).argv(request(backend="opencode")) == [
        "opencode",
        "acp",
    ]
    # A user's own approval mode (or --yolo) replaces ours.
    argv = gemini.argv(request(backend="gemini", extraArgs=["--yolo"]))
    assert argv == ["gemini", "--acp", "--yolo"]
    assert get_backend(AgentConfig(backend="gemini")).can_route(AgentConfig(backend="gemini"))


def test_the_generic_backend_needs_a_command() -> None:
    with pytest.raises(AgentError, match=r"agent\.command"):
        get_backend(AgentConfig(backend="acp")).argv(request(backend="acp"))
    argv = get_backend(AgentConfig(backend="acp")).argv(
        request(backend="acp", command="my-agent", extraArgs=["--stdio"])
    )
    assert argv == ["my-agent", "--stdio"]


def test_missing_binaries_name_their_npm_package() -> None:
    for backend, package in (
        ("gemini", "@google/gemini-cli"),
        ("opencode", "opencode-ai"),
        ("qwen", "@qwen-code/qwen-code"),
    ):
        assert (
            package in get_backend(AgentConfig.model_validate({"backend": backend})).missing_hint()
        )


def test_rules_may_name_acp_kinds() -> None:
    rule = ApprovalRule.model_validate(
        {"toolName": "execute", "paramPattern": "rm -rf", "description": "no", "decision": "deny"}
    )
    assert rule.tool_name == "execute"


def _update(body: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": "s", "update": body}


def test_tool_calls_merge_updates_and_name_the_files_an_edit_changed() -> None:
    calls = ToolCalls()
    (use,) = calls.update(
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "Write a",
                "kind": "edit",
                "rawInput": {"path": "/r/a"},
                "locations": [{"path": "/r/a", "line": 1}],
            }
        )
    )
    assert use == AgentToolUse("edit", "Write a", "c1", {"path": "/r/a"})
    assert (
        calls.update(
            _update(
                {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}
            )
        )
        == []
    )
    (done,) = calls.update(
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "completed",
                "rawOutput": {"ok": True},
            }
        )
    )
    assert done == AgentToolResult('{"ok": true}', False, "c1", files=("/r/a",))
    # A read's locations are not files it changed; a second "completed" is not news.
    calls.update(
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c2",
                "kind": "read",
                "locations": [{"path": "/r/b"}],
            }
        )
    )
    # Opened with no input only once it runs (Qwen Code sends the input later).
    use2, read = calls.update(
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "status": "completed"})
    )
    assert isinstance(use2, AgentToolUse) and use2.name == "read"
    assert isinstance(read, AgentToolResult) and read.files == ()
    assert (
        calls.update(
            _update(
                {"sessionUpdate": "tool_call_update", "toolCallId": "c2", "status": "completed"}
            )
        )
        == []
    )


def test_updates_text_plan_cost_and_the_unknown() -> None:
    calls = ToolCalls()
    text = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    assert calls.update(_update(text)) == [AgentText("hi")]
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}
    assert calls.update(_update(thought)) == []
    (plan,) = calls.update(
        _update({"sessionUpdate": "plan", "entries": [{"content": "a", "status": "completed"}]})
    )
    assert plan == AgentNotice("plan:\n  [completed] a")
    calls.update(
        _update(
            {
                "sessionUpdate": "usage_update",
                "used": 1,
                "size": 2,
                "cost": {"amount": 0.5, "currency": "EUR"},
            }
        )
    )
    assert calls.cost_usd is None  # not USD: not reported
    calls.update(
        _update(
            {
                "sessionUpdate": "usage_update",
                "used": 1,
                "size": 2,
                "cost": {"amount": 0.5, "currency": "USD"},
            }
        )
    )
    assert calls.cost_usd == 0.5
    (odd,) = calls.update(_update({"sessionUpdate": "brand_new"}))
    assert isinstance(odd, AgentNotice)


def test_permission_requests_take_the_kind_and_raw_input_of_the_call() -> None:
    calls = ToolCalls()
    calls.update(
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "kind": "execute",
                "rawInput": {"command": "ls"},
            }
        )
    )
    ask = calls.permission_request(
        7, {"toolCall": {"toolCallId": "c1", "title": "Run ls"}, "options": []}
    )
    assert (ask.request_id, ask.tool_name, ask.input, ask.description) == (
        "7",
        "execute",
        {"command": "ls"},
        "Run ls",
    )
    assert ask.tool_use_id == "c1"
    with pytest.raises(ValueError):
        calls.permission_request(8, {"options": []})


def test_the_answer_maps_to_an_offered_option() -> None:
    options = [
        {"optionId": "always", "kind": "allow_always"},
        {"optionId": "once", "kind": "allow_once"},
        {"optionId": "no", "kind": "reject_once"},
    ]
    assert choose_option(options, PermissionAnswer(True)) == {
        "outcome": "selected",
        "optionId": "once",
    }
    assert choose_option(options[:1], PermissionAnswer(True)) == {
        "outcome": "selected",
        "optionId": "always",
    }
    assert choose_option(options, PermissionAnswer(False)) == {
        "outcome": "selected",
        "optionId": "no",
    }
    assert choose_option(options[:2], PermissionAnswer(False)) == {"outcome": "cancelled"}
    assert choose_option("junk", PermissionAnswer(True)) == {"outcome": "cancelled"}


def test_the_stop_reason_is_the_result() -> None:
    done = result_of({"stopReason": "end_turn"}, "s", None, "bye")
    assert not done.is_error and done.subtype == "end_turn" and done.text == "bye"
    assert done.usage is None and done.cost_usd is None  # not reported, never 0
    assert result_of({"stopReason": "refusal"}, "s", None, "").is_error
    odd = result_of({"stopReason": "weird"}, "s", None, "")
    assert odd.is_error and "unknown stopReason" in odd.text
    meta = result_of(
        {"stopReason": "max_tokens", "_meta": {"usage": {"inputTokens": 3, "outputTokens": 4}}},
        "s",
        0.1,
        "",
    )
    assert meta.usage is not None and meta.usage.output_tokens == 4 and not meta.is_error


def _peer() -> tuple[Peer, list[bytes], list[str]]:
    sent: list[bytes] = []
    notices: list[str] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    return Peer(send, lambda method, params: None, notices.append), sent, notices


@pytest.mark.anyio
async def test_a_line_that_is_not_json_rpc_before_any_answer_ends_the_exchange() -> None:
    peer, _, _ = _peer()
    peer.receive(b"Usage: something")
    assert peer.failure is not None and "does not speak the Agent Client Protocol" in peer.failure
    with pytest.raises(PeerClosed):
        await peer.request("initialize", {})
    peer.finish()


@pytest.mark.anyio
async def test_an_overlong_answer_fails_its_request_and_later_lines_still_count() -> None:
    peer, sent, notices = _peer()
    async with anyio.create_task_group() as tg:
        outcome: list[BaseException] = []

        async def ask() -> None:
            try:
                await peer.request("session/prompt", {})
            except Exception as exc:
                outcome.append(exc)

        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        (line,) = sent
        msg_id = json.loads(line)["id"]
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"x":"' % msg_id
        whole = head + b"y" * (MAX_LINE + 10) + b'"}}'
        for start in range(0, len(whole), MAX_LINE):
            peer.receive(whole[start : start + MAX_LINE])
    assert "too long" in str(outcome[0])
    assert peer.failure is None and any("dropped" in n for n in notices)
    peer.finish()


@pytest.mark.anyio
async def test_an_agent_flooding_requests_is_a_failure_not_a_queue() -> None:
    peer, _, _ = _peer()
    peer.receive(b'{"jsonrpc":"2.0","id":0,"result":{}}')  # it speaks JSON-RPC
    for n in range(MAX_INBOUND + 1):
        peer.receive(json.dumps({"jsonrpc": "2.0", "id": n, "method": "x", "params": {}}).encode())
    assert peer.failure is not None and "without waiting" in peer.failure
    peer.finish()


def test_opencode_is_told_to_ask_unless_the_user_says_otherwise() -> None:
    backend = get_backend(AgentConfig(backend="opencode"))
    env = backend.environment(request(backend="opencode"))
    assert json.loads(env["OPENCODE_PERMISSION"])["edit"] == "ask"
    mine = backend.environment(request(backend="opencode", env={"OPENCODE_PERMISSION": "{}"}))
    assert mine["OPENCODE_PERMISSION"] == "{}"
    assert "OPENCODE_PERMISSION" not in get_backend(AgentConfig(backend="qwen")).environment(
        request(backend="qwen")
    )
