"""The contract against a live daemon: every method's real result fits its generated
schema, every event seen fits its struct, rpc.discover is shared/openrpc.json, and the
standard-library example client in shared/examples works as its README says."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from jsonschema import Draft202012Validator

from pokeralphd.protocol.events import check_event
from pokeralphd.server.dispatch import MethodTable
from pokeralphd.settings import DaemonSettings
from tests.helpers import FAKES, REPO_ROOT, DaemonProcess, make_git_repo
from tests.inproc import Client, running_daemon


def test_discover_is_the_shared_document(daemon: DaemonProcess) -> None:
    shared = json.loads((REPO_ROOT / "shared" / "openrpc.json").read_text())
    assert daemon.call("rpc.discover") == shared


def test_the_example_python_client(daemon: DaemonProcess, repo: object) -> None:
    example = REPO_ROOT / "shared" / "examples" / "watch.py"
    once = subprocess.run(
        [sys.executable, str(example), "--once"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert once.returncode == 0, once.stderr
    assert json.loads(once.stdout)["pid"] == daemon.pid
    watcher = subprocess.Popen(
        [sys.executable, str(example)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None and watcher.stderr is not None
        assert watcher.stderr.readline().startswith("subscribed at seq")
        daemon.call("repo.register", {"path": str(repo)})
        line = watcher.stdout.readline()
        assert "repo_registered" in line
    finally:
        watcher.terminate()
        watcher.wait(10)
        for pipe in (watcher.stdout, watcher.stderr):
            if pipe:
                pipe.close()


# --------------------------------------------------------------------------- real results


class Checked:
    """Checks each real result twice: decoded strictly into the method's registered type
    (msgspec: the wire field names and value types, no unknown field), and validated
    against the method's result schema in the OpenRPC document (jsonschema: the same,
    plus the documents results carry, through their pydantic-generated schemas)."""

    def __init__(self, table: MethodTable) -> None:
        self.table = table
        doc = table.discover()
        self.validators = {
            m["name"]: Draft202012Validator(
                {**m["result"]["schema"], "components": doc["components"]}
            )
            for m in doc["methods"]
        }
        self.results: dict[str, list[Any]] = defaultdict(list)

    async def call(self, client: Client, method: str, params: dict[str, Any] | None = None) -> Any:
        result = await client.call(method, params)
        self.check(method, result)
        return result

    def check(self, method: str, result: Any) -> None:
        try:
            msgspec.convert(result, self.table.methods[method].result, strict=True)
        except msgspec.ValidationError as exc:
            raise AssertionError(f"{method}: {exc}\n{json.dumps(result)[:2000]}") from exc
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in self.validators[method].iter_errors(result)
        ]
        assert not errors, f"{method} result does not fit its schema: {errors}"
        self.results[method].append(result)


async def until(watcher: Client, kind: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The next event of type ``kind``; every event on the way is checked and kept."""
    for event in await watcher.events_until({kind}, timeout=60):
        check_event(event)
        seen.append(event)
    return seen[-1]


def agent(command: str, **env: str) -> dict[str, Any]:
    return {"backend": "claude", "command": str(FAKES / command), "env": env}


@pytest.mark.anyio
async def test_every_method_answers_as_its_schema_says(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    other = make_git_repo(home / "other")
    settings = DaemonSettings(debug_methods=True)
    seen: list[dict[str, Any]] = []
    async with (
        running_daemon(home, settings) as d,
        d.client() as c,
        d.client() as watcher,
    ):
        ck = Checked(d.daemon.table)
        r, o = {"repo": str(repo)}, {"repo": str(other)}

        async def call(method: str, params: dict[str, Any] | None = None) -> Any:
            return await ck.call(c, method, params)

        assert await call("daemon.ping") == "pong"
        await call("daemon.status")
        await call("rpc.discover")
        await ck.call(watcher, "events.subscribe", {})

        # repositories, config, trust
        await call("repo.register", {"path": str(repo)})
        await call("repo.register", {"path": str(other), "name": "other"})
        await call("repo.list")
        await call(
            "config.update",
            {
                **r,
                "patch": {
                    "agent": agent("fake_claude", FAKE_CLAUDE_MODE="progress"),
                    "mode": "hitl",
                    "feedbackLoops": ["test"],
                    "feedbackCommands": {"test": "true"},
                },
            },
        )
        await call("config.get", r)
        await call("config.getUser")
        hook = {"name": "nowhere", "url": "http://127.0.0.1:9/hook", "format": "json"}
        await call("config.updateUser", {"patch": {"notify": {"webhooks": [hook]}}})
        await call("notify.test", {"channel": "nowhere"})  # a refused connection, reported
        await call("config.untrust", r)  # the agent command is sensitive: trusted again next
        trusted = await call("config.trust", r)
        assert trusted["trust"]["trusted"]
        await call("config.trustList")

        # approval rules
        added = await call(
            "rules.add",
            {
                **r,
                "toolName": "Bash",
                "paramPattern": '^\\{"command":"git status"\\}$',
                "description": "git status is harmless",
                "decision": "allow",
            },
        )
        await call(
            "rules.add",
            {
                **r,
                "toolName": "WebFetch",
                "paramPattern": "evil",
                "description": "never",
                "decision": "deny",
                "scope": "user",
            },
        )
        assert len((await call("rules.list", r))["rules"]) == 2
        tested = await call("rules.test", {**r, "tool": "Bash", "input": {"command": "git status"}})
        assert tested["decision"] == "allow" and tested["rule"]["id"] == added["rule"]["id"]
        assert (await call("rules.test", {**r, "tool": "Bash", "input": {}}))["rule"] is None
        await call("rules.remove", {**r, "id": added["rule"]["id"]})
        assert (await call("rules.installDefaults", {}))["added"][0] == "local-read-file"

        # the PRD and its tasks
        assert (await call("prd.get", o))["prd"] is None
        await call("prd.update", {**r, "description": "the contract, live"})
        task = (
            await call(
                "task.create",
                {**r, "title": "Make it work", "description": "d", "acceptanceCriteria": ["c"]},
            )
        )["task"]["id"]
        spare = await call(
            "task.create", {**r, "title": "Spare", "description": "d", "acceptanceCriteria": ["c"]}
        )
        await call("task.update", {**r, "taskId": spare["task"]["id"], "priority": 9})
        await call("task.get", {**r, "taskId": task})
        await call("task.list", r)
        await call("task.delete", {**r, "taskId": spare["task"]["id"]})
        await call("prd.get", r)

        # a battle, through every control
        assert (await call("battle.history", {**r, "taskId": task}))["battle"] is None
        assert (await call("battle.progress", {**r, "taskId": task}))["progress"] is None
        await call("battle.start", {**r, "taskId": task})
        await until(watcher, "await_approval", seen)
        await call("battle.current")
        await call("repo.status", r)
        await call("battle.progress", {**r, "taskId": task})
        await call("battle.history", {**r, "taskId": task})
        await call("battle.log", {**r, "taskId": task, "tail": 5})
        await call("battle.approve", {**r, "approve": False, "note": "not yet"})
        await until(watcher, "battle_paused", seen)
        assert "pauseRequested" not in await call("battle.pause", r)  # paused already
        await call("battle.resume", r)
        await until(watcher, "await_approval", seen)
        assert (await call("battle.pause", r))["pauseRequested"]
        await until(watcher, "battle_paused", seen)
        await call("battle.resume", r)
        await until(watcher, "await_approval", seen)
        await call("battle.approve", {**r, "note": "go on"})
        await until(watcher, "iteration_start", seen)
        await call("battle.cancel", r)
        await until(watcher, "battle_cancelled", seen)
        assert "version" in await call("battle.history", {**r, "taskId": task})
        assert (await call("battle.diff", {**r, "taskId": task}))["commit"]
        spent = await call("cost.summary", {"by": "task", "repo": r["repo"]})
        assert spent["total"]["iterations"] >= 1
        await call("battle.revert", {**r, "taskId": task})
        # seed 003's phases: a battle that goes through verification, and its report
        checked = (
            await call(
                "task.create",
                {**r, "title": "Verify it", "description": "d", "acceptanceCriteria": ["c"]},
            )
        )["task"]["id"]
        patch = {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}
        await call("config.update", {**r, "patch": patch})
        await call("battle.start", {**r, "taskId": checked, "mode": "yolo"})
        await until(watcher, "verification_report", seen)
        await until(watcher, "battle_complete", seen)
        report = await call("battle.report", {**r, "taskId": checked, "phase": "verification"})
        assert report["report"]["valid"] and report["report"]["cycle"] == 1
        # ... one the verifier rejects until it is escalated, then answered by battle.resolve
        rejected = (
            await call(
                "task.create",
                {**r, "title": "Escalate it", "description": "d", "acceptanceCriteria": ["c"]},
            )
        )["task"]["id"]
        rejecting = {"FAKE_CLAUDE_MODE": "complete", "FAKE_CLAUDE_VERDICT": "request_changes"}
        reject_patch: dict[str, Any] = {"agent": {"env": rejecting}, "maxVerificationCycles": 1}
        await call("config.update", {**r, "patch": reject_patch})
        await call("battle.start", {**r, "taskId": rejected, "mode": "yolo"})
        await until(watcher, "battle_escalated", seen)
        resolved = await call("battle.resolve", {**r, "taskId": rejected, "action": "accept"})
        assert resolved["battle"]["escalations"][-1]["resolution"]["action"] == "accept"
        await until(watcher, "battle_complete", seen)
        back: dict[str, Any] = {
            "agent": {"env": {"FAKE_CLAUDE_VERDICT": None}},
            "maxVerificationCycles": 3,
        }
        await call("config.update", {**r, "patch": back})

        # the inbox
        asked = await call(
            "inbox.create",
            {**r, "title": "Ship it?", "schema": {"type": "confirm", "prompt": "Ship?"}},
        )
        delivery = asked["delivery"]["id"]
        await call("inbox.list", {"status": "open"})
        await call(
            "inbox.create",
            {**r, "title": "Page", "body": "<p>hi</p>", "contentType": "html", "mode": "passive"},
        )
        await call("inbox.annotate", {"id": delivery, "content": "looks fine"})
        await call("inbox.answer", {"id": delivery, "values": {"value": True}, "note": "yes"})
        await call("inbox.get", {"id": delivery})
        assert (await call("inbox.wait", {"id": delivery}))["status"] == "answered"
        confirm = {"type": "confirm", "prompt": "Later?"}
        later = (
            await call(
                "inbox.create", {**r, "title": "Later?", "mode": "blocking", "schema": confirm}
            )
        )["delivery"]["id"]
        assert (await call("inbox.wait", {"id": later, "timeout": 0}))["status"] == "timeout"
        await call("inbox.close", {"id": later})
        assert (await call("inbox.wait", {"id": later}))["status"] == "closed"

        # planning: an invalid PRD (problems), then a valid one, previewed and saved
        planner = home / "planner"
        for prd_kind in ("invalid", "valid"):
            env = {"FAKE_PLANNER_DIR": str(planner / prd_kind), "FAKE_PLANNER_PRD": prd_kind}
            await call(
                "config.update", {**o, "patch": {"agent": agent("fake_claude_planner", **env)}}
            )
            await call("planning.start", {**o, "idea": "a todo list"})
            await until(watcher, "planning_question", seen)
            await call("planning.status", o)
            await call("planning.answer", {**o, "answer": "JSON"})
            await until(watcher, "planning_question", seen)
            await call("planning.answer", {**o, "answer": "no"})
            await until(watcher, "planning_completed", seen)
            finished = await call("planning.finish", o)
            assert finished["valid"] is (prd_kind == "valid")
            if finished["valid"]:
                assert "version" in await call("planning.finish", {**o, "save": True})
            await call("planning.reset", o)

        await call("debug.emit", {"count": 2})
        await call("repo.unregister", o)
        await ck.call(watcher, "events.unsubscribe", {})
        while True:  # the events not waited for are checked too
            try:
                event = watcher.events.receive_nowait()
            except anyio.WouldBlock:
                break
            check_event(event)
            seen.append(event)
        await call("events.subscribe", {"since": 0})  # replayed and lost come with since
        await call("daemon.shutdown")

    assert set(ck.results) == set(ck.table.methods), "every method is called here"
    assert {e["type"] for e in seen} >= {"await_approval", "battle_paused", "planning_completed"}
