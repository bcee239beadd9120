"""Claude Code's permission prompts, routed through the daemon: rules first, then the
policy (a person through the inbox by default). The fake speaks the real CLI's stdio
control protocol (tests/fakes/CLAUDE-PERMISSIONS.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FAKES, make_git_repo
from tests.inproc import Client, InProcDaemon, running_daemon, setup_task
from tests.integration.battle_helpers import output_texts

pytestmark = pytest.mark.anyio
COMMAND = "touch permission-bash.txt"
EXACT = (
    "^"
    + json.dumps(
        {"command": COMMAND, "description": "Run a command"}, separators=(",", ":"), sort_keys=True
    ).replace(".", "\\.")
    + "$"
)


async def _setup(d: InProcDaemon, repo: Path, **config: Any) -> str:
    agent = {
        "backend": "claude",
        "command": str(FAKES / "fake_claude"),
        "env": {"FAKE_CLAUDE_MODE": "permission_bash"},
    }
    return await setup_task(d, repo, agent, ("Run it", "Run the command", "it ran"), **config)


async def _battle(d: InProcDaemon, watcher: Client, repo: Path, task: str) -> list[dict[str, Any]]:
    await watcher.call("events.subscribe", {"repo": str(repo)})
    await d.call("battle.start", {"repo": str(repo), "taskId": task})
    return await watcher.events_until({"battle_complete", "battle_failed", "battle_cancelled"})


async def _answered(
    d: InProcDaemon, repo: Path, task: str, value: str, note: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Start the battle, answer the permission item it raises; the item and the events."""
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        events = await watcher.events_until({"new_delivery"})
        delivery: dict[str, Any] = events[-1]["payload"]["delivery"]
        answer: dict[str, Any] = {"id": delivery["id"], "values": {"value": value}}
        if note is not None:
            answer["note"] = note
        await d.call("inbox.answer", answer)
        return delivery, await watcher.events_until({"battle_failed", "battle_complete"})


async def _calls(d: InProcDaemon, repo: Path, task: str) -> list[dict[str, Any]]:
    """The tool calls recorded in the battle's (only) iteration."""
    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    [iteration] = history["battle"]["iterations"]
    calls: list[dict[str, Any]] = iteration["toolCalls"]
    return calls


def _decided(events: list[dict[str, Any]]) -> dict[str, Any]:
    decided: list[dict[str, Any]] = [
        e["payload"] for e in events if e["type"] == "permission_decided"
    ]
    assert len(decided) == 1, decided
    return decided[0]


async def test_an_allow_rule_lets_the_command_run_and_counts_its_use(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        added = await d.call(
            "rules.add",
            {
                "repo": str(repo),
                "toolName": "Bash",
                "paramPattern": EXACT,
                "description": "the task's own command",
                "decision": "allow",
            },
        )
        async with d.client() as watcher:
            events = await _battle(d, watcher, repo, task)
        requested = [e for e in events if e["type"] == "permission_requested"]
        assert requested and requested[0]["payload"]["tool"] == "Bash"
        decided = _decided(events)
        assert decided["allowed"] and decided["method"] == "config_rule"
        assert decided["ruleId"] == added["rule"]["id"]
        assert (repo / "permission-bash.txt").exists()
        rules = await d.call("rules.list", {"repo": str(repo)})
        (rule,) = [r for r in rules["rules"] if r["id"] == added["rule"]["id"]]
        assert rule["useCount"] == 1
        [call] = await _calls(d, repo, task)
        assert call["toolName"] == "Bash" and call["status"] == "executed"
        assert call["approvalMethod"] == "config_rule" and call["ruleId"] == rule["id"]
        assert (
            call["input"] == '{"command":"touch permission-bash.txt","description":"Run a command"}'
        )
        assert call["result"]["success"] is True
        assert call["requestedAt"] <= call["decidedAt"] <= call["executedAt"]
        log = await d.call("battle.log", {"repo": str(repo), "taskId": task})
        assert f"[pokeralph] Bash allowed by rule {rule['id']}" in log["data"]


async def test_a_deny_rule_beats_an_allow_rule(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        for decision, pattern in (("allow", EXACT), ("deny", '"command":"touch ')):
            await d.call(
                "rules.add",
                {
                    "repo": str(repo),
                    "toolName": "Bash",
                    "paramPattern": pattern,
                    "description": f"{decision} it",
                    "decision": decision,
                },
            )
        async with d.client() as watcher:
            events = await _battle(d, watcher, repo, task)
        decided = _decided(events)
        assert not decided["allowed"] and decided["method"] == "config_rule"
        assert "denied by rule" in decided["message"]
        assert not (repo / "permission-bash.txt").exists()


async def test_an_unmatched_call_asks_a_person_whose_deny_reaches_the_model(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        delivery, events = await _answered(d, repo, task, "deny", "not in here")
        assert delivery["source"]["kind"] == "permission" and "Bash" in delivery["title"]
        decided = _decided(events)
        assert not decided["allowed"] and decided["method"] == "manual"
        assert decided["message"] == "denied by the user: not in here"
        assert not (repo / "permission-bash.txt").exists()
        [call] = await _calls(d, repo, task)
        assert call["status"] == "rejected" and call["approvalMethod"] == "manual"
        assert call["message"] == "denied by the user: not in here" and call["result"] is None


async def test_a_refusal_the_agent_made_on_its_own_is_recorded(home: Path) -> None:
    """Unrouted (prompt as an argument): Claude Code refuses the command itself and says
    so with ``permission_denied``; the call is recorded as rejected, with its message."""
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        await d.call(
            "config.update", {"repo": str(repo), "patch": {"agent": {"promptVia": "argument"}}}
        )
        async with d.client() as watcher:
            events = await _battle(d, watcher, repo, task)
        assert not [e for e in events if e["type"] == "permission_requested"]
        notices = output_texts(events, "notice")
        assert any(
            "the agent refused Bash on its own: touch permission-bash.txt needs approval." in n
            for n in notices
        ), notices
        [call] = await _calls(d, repo, task)
        assert call["status"] == "rejected" and call["approvalMethod"] == "auto"
        assert call["message"] == "touch permission-bash.txt needs approval."


async def test_allow_always_runs_it_and_leaves_a_rule(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        _delivery, events = await _answered(d, repo, task, "allow_always")
        decided = _decided(events)
        assert decided["allowed"] and decided["method"] == "manual" and decided["ruleId"]
        assert (repo / "permission-bash.txt").exists()
        test = await d.call(
            "rules.test",
            {
                "repo": str(repo),
                "tool": "Bash",
                "input": {"command": COMMAND, "description": "Run a command"},
            },
        )
        assert test["decision"] == "allow"


async def test_the_deny_policy_refuses_unmatched_calls_at_once(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo, permissions={"unmatched": "deny"})
        async with d.client() as watcher:
            events = await _battle(d, watcher, repo, task)
        decided = _decided(events)
        assert not decided["allowed"] and decided["method"] == "policy"
        assert not [e for e in events if e["type"] == "new_delivery"]


async def test_the_allow_policy_is_shown_as_a_warning(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(
            d, repo, permissions={"unmatched": "allow"}, mode="hitl", maxIterationsPerTask=2
        )
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            await watcher.events_until({"await_approval"})
        current = await d.call("battle.current", {"repo": str(repo)})
        [battle] = current["battles"]
        assert any("permissions.unmatched is allow" in w for w in battle["warnings"])
        [listed] = await d.call("repo.list", {})
        assert listed["battle"]["warnings"] == battle["warnings"]
        await d.call("battle.cancel", {"repo": str(repo), "taskId": task})


def test_policy_warnings() -> None:
    from pokeralph_core.config.model import Config
    from pokeralphd.permissions.router import policy_warnings

    assert policy_warnings(Config()) == []
    [unrouted] = policy_warnings(Config.model_validate({"agent": {"backend": "codex"}}))
    assert "does not ask before a tool runs" in unrouted
    # what each backend says of itself decides: Claude Code asks only with the prompt on stdin
    argument = Config.model_validate({"agent": {"backend": "claude", "promptVia": "argument"}})
    [unrouted] = policy_warnings(argument)
    assert "claude backend with promptVia argument does not ask" in unrouted
    assert policy_warnings(Config.model_validate({"agent": {"backend": "local"}})) == []
    [allow] = policy_warnings(Config.model_validate({"permissions": {"unmatched": "allow"}}))
    assert "without asking" in allow
