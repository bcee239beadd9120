"""The acp backend against a fake Agent Client Protocol agent (tests/fakes/fake_acp),
through an in-process daemon: a battle, its permission requests decided by the rules and
the inbox, its tool calls recorded, and the protocol's edges (an agent that never
answers ``initialize``, one that does not speak ACP, malformed and huge messages, a crash
mid-prompt, a permission request during cancel)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents import acp_session, get_backend
from pokeralphd.agents.base import AgentEvent, AgentPermissionDecision, AgentRequest
from pokeralphd.agents.runner import run_agent
from tests.helpers import FAKES, make_git_repo
from tests.inproc import InProcDaemon, running_daemon, setup_task
from tests.integration.battle_helpers import output_texts

pytestmark = pytest.mark.anyio
ENDS = {"battle_complete", "battle_failed", "battle_cancelled"}


async def _setup(d: InProcDaemon, repo: Path, mode: str, log: Path, **config: Any) -> str:
    agent = {
        "backend": "acp",
        "command": str(FAKES / "fake_acp"),
        "env": {"FAKE_ACP_MODE": mode, "FAKE_ACP_LOG": str(log)},
    }
    return await setup_task(d, repo, agent, **config)


async def _battle(d: InProcDaemon, repo: Path, task: str) -> list[dict[str, Any]]:
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        return await watcher.events_until(ENDS)


def _output(events: list[dict[str, Any]], kind: str) -> str:
    """Every output chunk of ``kind`` the battle published."""
    return "\n".join(output_texts(events, kind))


async def _iteration(d: InProcDaemon, repo: Path, task: str) -> dict[str, Any]:
    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    [iteration] = history["battle"]["iterations"]
    result: dict[str, Any] = iteration
    return result


def _received(log: Path) -> tuple[int, list[dict[str, Any]]]:
    """The first run's pid, and every message its runs received (and noted)."""
    first, *rest = log.read_text().splitlines()
    received = [json.loads(line) for line in rest]
    return int(first), [m for m in received if isinstance(m, dict)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie has ended too.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1].startswith("Z")


async def test_a_yolo_battle_writes_the_file_records_the_call_and_completes(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "complete", log, permissions={"unmatched": "allow"})
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        assert (repo / "work.txt").read_text() == "done\n"
        iteration = await _iteration(d, repo, task)
        [call] = iteration["toolCalls"]
        assert call["toolName"] == "edit" and call["status"] == "executed"
        assert call["approvalMethod"] == "auto"
        assert call["result"]["filesAffected"] == ["work.txt"]
        assert call["result"]["output"].startswith("wrote work.txt")
        assert iteration["sessionId"] == "sess-fake-1"
        assert iteration["costUsd"] == 0.0125
        assert iteration["usage"]["inputTokens"] == 120
        assert iteration["usage"]["cacheReadInputTokens"] == 7
        assert "plan:\n  [in_progress] write work.txt" in _output(events, "notice")
        assert "is not said in thoughts" not in _output(events, "text")
    _, received = _received(log)
    init = received[0]
    assert init["method"] == "initialize" and init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    assert received[1]["params"] == {"cwd": str(repo), "mcpServers": []}
    # Allowed once, never "always": our rules are the ones that remember.
    assert received[3]["result"]["outcome"] == {"outcome": "selected", "optionId": "proceed_once"}


async def test_an_agent_that_stays_after_its_turn_is_ended_without_failing_the_run(
    home: Path,
) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(
            d, repo, "linger", log, permissions={"unmatched": "allow"}, phases=["implementation"]
        )
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        iteration = await _iteration(d, repo, task)
        assert iteration["error"] is None and iteration["result"] == "success"
    pid, _ = _received(log)
    assert _gone(pid)


async def test_a_permission_becomes_an_inbox_item_answered_allow(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "complete", log)
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            events = await watcher.events_until({"new_delivery"})
            delivery = events[-1]["payload"]["delivery"]
            assert delivery["source"]["kind"] == "permission" and "edit" in delivery["title"]
            await d.call("inbox.answer", {"id": delivery["id"], "values": {"value": "allow"}})
            events = await watcher.events_until(ENDS)
        assert events[-1]["type"] == "battle_complete"
        [call] = (await _iteration(d, repo, task))["toolCalls"]
        assert call["approvalMethod"] == "manual" and call["status"] == "executed"
        assert json.loads(call["input"])["content"] == "done\n"


async def test_a_deny_rule_refuses_the_call_without_asking(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "complete", log)
        added = await d.call(
            "rules.add",
            {
                "repo": str(repo),
                "toolName": "edit",
                "paramPattern": '"content":"done',
                "description": "no edits saying done",
                "decision": "deny",
            },
        )
        events = await _battle(d, repo, task)
        assert not [e for e in events if e["type"] == "new_delivery"]
        assert events[-1]["type"] == "battle_failed"
        assert not (repo / "work.txt").exists()
        [call] = (await _iteration(d, repo, task))["toolCalls"]
        assert call["status"] == "rejected" and call["approvalMethod"] == "config_rule"
        assert call["ruleId"] == added["rule"]["id"]
    _, received = _received(log)
    assert received[3]["result"]["outcome"] == {"outcome": "selected", "optionId": "cancel"}


async def test_an_agent_that_never_answers_initialize_fails_after_a_bounded_wait(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acp_session, "INIT_SECONDS", 1.0)
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "no_init", log)
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_failed"
        iteration = await _iteration(d, repo, task)
        assert "did not answer initialize within 1 s" in iteration["error"]
    pid, _ = _received(log)
    assert _gone(pid)


@pytest.mark.parametrize("mode", ["not_acp", "usage_exit"])
async def test_an_agent_that_does_not_speak_acp_is_a_clear_error(home: Path, mode: str) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, mode, log)
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_failed"
        error = (await _iteration(d, repo, task))["error"]
        assert "does not speak the Agent Client Protocol" in error
        assert "Usage: agent [options] PROMPT" in error
    pid, _ = _received(log)
    assert _gone(pid)


async def test_malformed_messages_are_notices_and_unserved_requests_are_refused(
    home: Path,
) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "malformed", log, permissions={"unmatched": "allow"})
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        notices = _output(events, "notice")
        assert "not JSON-RPC: this is not json" in notices
        assert "an answer to no request of ours" in notices
        assert "a request with an invalid id" in notices
    _, received = _received(log)
    [fs] = [m["fs_answer"] for m in received if "fs_answer" in m]
    assert fs["error"]["code"] == -32601
    [bad] = [m["bad_permission_answer"] for m in received if "bad_permission_answer" in m]
    assert bad["error"]["code"] == -32602


async def test_a_huge_tool_output_is_dropped_not_held(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "huge", log, permissions={"unmatched": "allow"})
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        calls = {c["id"]: c for c in (await _iteration(d, repo, task))["toolCalls"]}
        # The 3 MiB update was dropped: the call stays open, its output never held.
        assert calls["call-big"]["status"] == "pending"
        assert calls["call-mid"]["status"] == "executed"
        assert len(calls["call-mid"]["result"]["output"]) < 300_000
    _, received = _received(log)
    [huge] = [m["huge_answer"] for m in received if "huge_answer" in m]
    assert huge["error"]["code"] == -32000 and "dropped" in huge["error"]["message"]


async def _failed_iteration(home: Path, script: str) -> str:
    """The error of the one iteration of a battle the fake agent ``script`` fails."""
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo, script, home / "acp.log")
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_failed"
        error: str = (await _iteration(d, repo, task))["error"]
    return error


async def test_a_crash_mid_prompt_fails_with_its_exit_status_and_stderr(home: Path) -> None:
    error = await _failed_iteration(home, "crash")
    assert "exited with status 3" in error and "fake agent crashed" in error


async def test_a_refusal_is_the_iterations_error(home: Path) -> None:
    assert "refusal" in await _failed_iteration(home, "refuse")


async def test_an_agent_asking_for_a_login_says_how(home: Path) -> None:
    error = await _failed_iteration(home, "auth")
    assert "needs authentication: Authentication required" in error


async def test_cancel_answers_pending_permissions_cancelled_and_ends_the_agent(
    home: Path,
) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "wait_cancel", log)
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            await watcher.events_until({"new_delivery"})
            await d.call("battle.cancel", {"repo": str(repo)})
            events = await watcher.events_until(ENDS)
        assert events[-1]["type"] == "battle_cancelled"
        assert not (repo / "nope.txt").exists()
    pid, received = _received(log)
    assert {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "sess-fake-1"},
    } in received
    [first] = [m["first_outcome"] for m in received if "first_outcome" in m]
    assert first == {"outcome": "cancelled"}
    assert _gone(pid)


async def test_an_idle_agent_is_sent_session_cancel_and_ended(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    log = home / "acp.log"
    async with running_daemon(home) as d:
        task = await _setup(d, repo, "hang", log, idleTimeoutMinutes=0.02)
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_failed"
        assert "stalled" in (await _iteration(d, repo, task))["error"]
    pid, received = _received(log)
    assert [m for m in received if m.get("method") == "session/cancel"]
    assert _gone(pid)


async def test_a_missing_preset_binary_is_refused_at_start_naming_its_package(
    home: Path,
) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        agent = {"backend": "gemini", "command": str(home / "no-such-gemini")}
        task = await setup_task(d, repo, agent)
        with pytest.raises(Exception, match="@google/gemini-cli"):
            await d.call("battle.start", {"repo": str(repo), "taskId": task})


async def test_a_planning_run_allows_reading_and_refuses_an_edit_without_asking(
    tmp_path: Path,
) -> None:
    config = AgentConfig.model_validate(
        {"backend": "acp", "command": str(FAKES / "fake_acp"), "env": {"FAKE_ACP_MODE": "complete"}}
    )
    events: list[AgentEvent] = []
    outcome = await run_agent(
        get_backend(config),
        AgentRequest("plan it", tmp_path, "plan", config, timeout=60),
        events.append,
        lambda raw: None,
    )
    [decision] = [e for e in events if isinstance(e, AgentPermissionDecision)]
    assert decision.request.tool_name == "edit" and not decision.answer.allow
    assert not (tmp_path / "work.txt").exists()
    assert outcome.error is None and outcome.texts == ["I could not write it."]


async def test_a_long_completion_block_streamed_in_small_pieces_completes(home: Path) -> None:
    """An ACP agent's message comes in pieces (a model streams tokens). Its sigil and a
    completion block of ~9,000 characters in 16-character pieces: the turn's text was
    kept as its last 200 pieces, so neither was found and the battle ran on."""
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(
            d, repo, "long_block", home / "acp.log", permissions={"unmatched": "allow"}
        )
        events = await _battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        iteration = await _iteration(d, repo, task)
    completion = iteration["completion"]
    assert completion["kind"] == "block" and len(completion["acceptanceCriteriaMet"]) == 40
