"""Battles and planning through a real daemon running the real Claude Code CLI.

The CLI (tests/real/install.sh) talks only to the scripted Messages API on 127.0.0.1;
the daemon runs in the test's own loop on a real socket. What these prove, each through
the real CLI's own permission channel: rules, the inbox as the fallback, the agent scope,
rule use counts across a restart, the API-key 429, and planning without plan mode.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pokeralphd.protocol.codes import ErrorCode
from tests.fakes.messages_api import ApiError, MessagesAPI, Text, ToolUse, Turn, result_text
from tests.helpers import make_git_repo
from tests.inproc import Client, InProcDaemon, RpcError, running_daemon, setup_task
from tests.real.conftest import claude_env

pytestmark = pytest.mark.anyio
DONE = Text("All done.\n\n<promise>COMPLETE</promise>")
MAKE_TEST = {"command": "make test", "description": "Run the tests"}
MAKE_CHECK = {"command": "make check", "description": "Run the checks"}
EXACT_MAKE_TEST = '^{"command":"make test","description":"Run the tests"}$'


@pytest.fixture
def repo(home: Path) -> Path:
    path = make_git_repo(home / "repo")
    # `make test` and `make check` write a file, so they need approval even in acceptEdits.
    (path / "Makefile").write_text(
        "test:\n\tpython3 -c \"open('tested.txt', 'w').write('ok')\"\n"
        "check:\n\tpython3 -c \"open('checked.txt', 'w').write('ok')\"\n"
    )
    return path


async def _setup(
    d: InProcDaemon, repo: Path, api: MessagesAPI, claude: Path, home: Path, **config: Any
) -> str:
    (home / "h").mkdir(exist_ok=True)
    agent = {"backend": "claude", "command": str(claude), "env": claude_env(api, home / "h")}
    config = {
        "autoCommit": False,
        "phases": ["implementation"],  # what these prove ends with the implementer
        **config,
    }
    tests = ("Run the tests", "Run make test", "the tests ran")
    return await setup_task(d, repo, agent, tests, **config)


async def _battle(d: InProcDaemon, repo: Path, task: str) -> list[dict[str, Any]]:
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        return await watcher.events_until({"battle_complete", "battle_failed", "battle_paused"})


async def _allow_make_test(d: InProcDaemon, repo: Path) -> str:
    added = await d.call(
        "rules.add",
        {
            "repo": str(repo),
            "toolName": "Bash",
            "paramPattern": EXACT_MAKE_TEST,
            "description": "the test suite",
            "decision": "allow",
        },
    )
    return str(added["rule"]["id"])


async def test_an_allow_rule_runs_make_test_and_the_count_survives_a_restart(
    claude_bin: Path, home: Path, repo: Path
) -> None:
    with MessagesAPI([ToolUse("Bash", MAKE_TEST, text="Running the tests."), DONE]) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, claude_bin, home)
            rule = await _allow_make_test(d, repo)
            events = await _battle(d, repo, task)
            assert events[-1]["type"] == "battle_complete", events[-1]
            [decided] = [e["payload"] for e in events if e["type"] == "permission_decided"]
            assert decided["allowed"] and decided["ruleId"] == rule
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
            [call] = history["battle"]["iterations"][0]["toolCalls"]
            assert call["status"] == "executed" and call["approvalMethod"] == "config_rule"
        assert (repo / "tested.txt").read_text() == "ok"
        [result] = api.tool_results()
        assert not result.get("is_error")
    async with running_daemon(home) as d:
        rules = await d.call("rules.list", {"repo": str(repo)})
        [listed] = [r for r in rules["rules"] if r["id"] == rule]
        assert listed["useCount"] == 1 and listed["lastUsedAt"]


async def test_a_deny_rule_beats_an_allow_rule_and_a_blanket_rule_is_refused(
    claude_bin: Path, home: Path, repo: Path
) -> None:
    with MessagesAPI([ToolUse("Bash", MAKE_TEST), DONE]) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, claude_bin, home)
            await _allow_make_test(d, repo)
            with pytest.raises(RpcError) as refused:
                await d.call(
                    "rules.add",
                    {
                        "repo": str(repo),
                        "toolName": "Bash",
                        "paramPattern": ".*",
                        "description": "everything",
                        "decision": "allow",
                    },
                )
            assert refused.value.code == ErrorCode.INVALID_PARAMS
            assert "blanket" in refused.value.message
            await d.call(
                "rules.add",
                {
                    "repo": str(repo),
                    "toolName": "Bash",
                    "paramPattern": '"command":"make ',
                    "description": "no make here",
                    "decision": "deny",
                },
            )
            events = await _battle(d, repo, task)
        [decided] = [e["payload"] for e in events if e["type"] == "permission_decided"]
        assert not decided["allowed"] and "no make here" in decided["message"]
        assert not (repo / "tested.txt").exists()
        [result] = api.tool_results()
        assert result["is_error"] and "no make here" in result_text(result)


async def _answer_the_ask(
    d: InProcDaemon, watcher: Client, command: str, value: str, note: str | None = None
) -> None:
    """Wait for the inbox item that asks for ``command`` and answer it ``value`` (with
    ``note``)."""
    events = await watcher.events_until({"new_delivery"})
    delivery = events[-1]["payload"]["delivery"]
    assert delivery["source"]["kind"] == "permission" and command in json.dumps(delivery["content"])
    answer: dict[str, Any] = {"id": delivery["id"], "values": {"value": value}}
    if note:
        answer["note"] = note
    await d.call("inbox.answer", answer)


async def test_unmatched_calls_in_hitl_are_answered_from_the_inbox_allow_then_deny(
    claude_bin: Path, home: Path, repo: Path
) -> None:
    """One run, two asks: ``make test`` answered allow runs; ``make check`` answered deny
    (with a note) does not, and the model reads the note."""
    tests, checks = ToolUse("Bash", MAKE_TEST), ToolUse("Bash", MAKE_CHECK)
    with MessagesAPI([tests, checks, DONE]) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, claude_bin, home, mode="hitl")
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                await _answer_the_ask(d, watcher, "make test", "allow")
                await _answer_the_ask(d, watcher, "make check", "deny", "not today")
                events = await watcher.events_until(
                    {"battle_complete", "battle_failed", "await_approval"}
                )
            assert events[-1]["type"] in ("await_approval", "battle_complete"), events[-1]
            if events[-1]["type"] == "await_approval":
                await d.call("battle.cancel", {"repo": str(repo), "taskId": task})
        results = {r["tool_use_id"]: r for r in api.tool_results()}
    assert sorted(results) == sorted([tests.id, checks.id])  # one result for each call
    assert (repo / "tested.txt").exists() and not results[tests.id].get("is_error")
    assert not (repo / "checked.txt").exists()
    denied = results[checks.id]
    assert denied["is_error"] and result_text(denied) == "denied by the user: not today"


async def test_the_agents_own_calls_are_scoped(claude_bin: Path, home: Path, repo: Path) -> None:
    """The agent runs pokeralphctl through Bash: deliver works; config set and answer are
    refused."""
    ctl = f"{sys.executable} -m pokeralphctl --json"
    deliver = {
        "command": f"{ctl} deliver --title 'a question' --schema confirm",
        "description": "ask",
    }
    config = {"command": f"{ctl} config set permissions.unmatched allow", "description": "x"}
    read_id = (
        'python3 -c \'import json,sys; print(json.load(sys.stdin)["result"]["delivery"]["id"])\''
    )
    answer = {
        "command": f"{ctl} answer $({ctl} deliver --title second --schema confirm | {read_id}) --yes",
        "description": "answer my own question",
    }
    script: list[Turn] = [
        ToolUse("Bash", deliver),
        ToolUse("Bash", config),
        ToolUse("Bash", answer),
        DONE,
    ]
    with MessagesAPI(script) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, claude_bin, home, permissions={"unmatched": "allow"})
            events = await _battle(d, repo, task)
            assert events[-1]["type"] == "battle_complete", events[-1]
            effective = await d.call("config.get", {"repo": str(repo)})
            inbox = await d.call("inbox.list", {"repo": str(repo)})
        outputs = [result_text(r) for r in api.tool_results()]
    delivered = json.loads(outputs[0])
    assert delivered["ok"] and delivered["result"]["delivery"]["source"]["kind"] == "agent"
    for refused in outputs[1:]:
        assert f"{int(ErrorCode.AGENT_SCOPE)}" in refused, refused
    assert effective["config"]["permissions"]["unmatched"] == "allow"  # ours, unchanged
    assert effective["repoLayer"]["permissions"] == {"unmatched": "allow"}
    assert sorted(i["title"] for i in inbox["items"]) == ["a question", "second"]
    assert all(i["status"] == "awaiting_feedback" for i in inbox["items"])
    assert {e["payload"]["method"] for e in events if e["type"] == "agent_refused"} == {
        "config.update",
        "inbox.answer",
    }


async def test_an_api_key_429_blocks_without_burning_the_iteration(
    claude_bin: Path, home: Path, repo: Path
) -> None:
    limited = ApiError(
        429, "rate_limit_error", "slow down", {"x-should-retry": "false"}, sticky=True
    )
    with MessagesAPI([limited]) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, claude_bin, home)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until(
                    {"battle_blocked", "battle_complete", "battle_failed"}
                )
            assert events[-1]["type"] == "battle_blocked", events[-1]
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
            task_now = await d.call("task.get", {"repo": str(repo), "taskId": task})
            await d.call("battle.cancel", {"repo": str(repo), "taskId": task})
    payload = events[-1]["payload"]
    assert "rate limited (429)" in payload["reason"] and payload["kind"] == "rate_limit"
    assert [i["result"] for i in history["battle"]["iterations"]] == ["cancelled"]
    assert task_now["task"]["status"] == "blocked"


async def test_planning_yields_a_prd_without_plan_mode(
    claude_bin: Path, home: Path, repo: Path
) -> None:
    prd = {
        "name": "Greeter",
        "description": "Says hello.",
        "tasks": [
            {
                "title": "Print hello",
                "description": "A script that prints hello",
                "acceptanceCriteria": ["it prints hello"],
                "priority": 1,
            }
        ],
    }
    script: list[Turn] = [
        ToolUse("Read", {"file_path": str(repo / "Makefile")}),
        ToolUse("Write", {"file_path": str(repo / "plan.md"), "content": "x"}),
        Text(f"Here it is.\n<prd>{json.dumps(prd)}</prd>"),
    ]
    with MessagesAPI(script) as api:
        async with running_daemon(home) as d:
            await _setup(d, repo, api, claude_bin, home)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("planning.start", {"repo": str(repo), "idea": "a greeter"})
                events = await watcher.events_until({"planning_completed", "planning_failed"})
            assert events[-1]["type"] == "planning_completed", events[-1]
            saved = await d.call("planning.finish", {"repo": str(repo), "save": True})
        first = api.message_requests()[0].body
        results = api.tool_results()
    assert saved["saved"] and saved["prd"]["tasks"][0]["title"] == "Print hello"
    # Read-only tools, and none of plan mode's instructions to fight the <prd> protocol.
    assert {t["name"] for t in first["tools"]} <= {
        "Read",
        "Grep",
        "Glob",
        "DeferredToolPlaceholder",
    }
    assert "ExitPlanMode" not in json.dumps(first) and ".claude/plans" not in json.dumps(first)
    assert not (repo / "plan.md").exists()
    assert any(r.get("is_error") and "Write" in result_text(r) for r in results)
