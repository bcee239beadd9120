"""An agent's own connections get the agent scope: ping, deliver to the inbox and wait on
its own deliveries, read its own task; everything else is refused with a clear error and
recorded, however the agent's process calls (itself, a child without the run's
variables, a grandchild that left the group and session)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pokeralphd.proc import CHILD_SCOPE, UNKNOWN_SCOPE, AgentScope, ProcessOwner
from pokeralphd.procenv import OWNER_VAR
from pokeralphd.protocol.codes import ErrorCode
from tests.helpers import FAKES, make_git_repo
from tests.inproc import running_daemon

pytestmark = pytest.mark.anyio
SCOPE = int(ErrorCode.AGENT_SCOPE)


async def test_an_agent_may_only_act_in_its_own_scope(home: Path, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "probes.jsonl"
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        tasks = []
        for title in ("Probe the daemon", "Someone else's task"):
            created = await d.call(
                "task.create",
                {
                    "repo": str(repo),
                    "title": title,
                    "description": "d",
                    "acceptanceCriteria": ["c"],
                },
            )
            tasks.append(created["task"]["id"])
        await d.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "agent": {
                        "backend": "command",
                        "command": sys.executable,
                        "extraArgs": [str(FAKES / "scope_probe")],
                        "env": {"SCOPE_OUT": str(out), "SCOPE_OTHER_TASK": tasks[1]},
                    },
                    "mode": "yolo",
                    "maxIterationsPerTask": 1,
                    "phases": ["implementation"],  # the probe cannot verify
                    "feedbackLoops": ["test"],
                    "feedbackCommands": {"test": "true"},
                },
            },
        )
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": tasks[0]})
            events = await watcher.events_until({"battle_complete", "battle_failed"})
        assert events[-1]["type"] == "battle_complete", events[-1]
        config = await d.call("config.get", {"repo": str(repo)})
        inbox = await d.call("inbox.list", {"repo": str(repo)})

    probes = [json.loads(line) for line in out.read_text().splitlines()]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for probe in probes:
        by.setdefault((probe["who"], probe["method"]), []).append(probe)

    def outcome(who: str, method: str) -> list[bool]:
        return [p["ok"] for p in by[(who, method)]]

    assert outcome("agent", "daemon.ping") == [True]
    assert outcome("agent", "task.get") == [True, False]  # its own task; not another's
    assert outcome("agent", "inbox.create") == [True, False]  # not for another task
    assert outcome("agent", "inbox.get") == [True]
    for method in ("config.update", "battle.approve", "inbox.list", "inbox.answer"):
        [refused] = by[("agent", method)]
        assert refused["code"] == SCOPE, refused
        assert "refused: this connection is the battle agent of" in refused["message"]
    # The client as agents use it: deliver works, config set does not.
    assert outcome("pokeralphctl", "deliver") == [True]
    assert outcome("pokeralphctl", "config") == [False]
    assert str(SCOPE) in by[("pokeralphctl", "config")][0]["out"]
    # Hiding does not help: no variables, or another session and parent.
    assert by[("scrubbed", "config.update")][0]["code"] == SCOPE
    assert by[("detached", "config.update")][0]["code"] == SCOPE

    # Nothing the agent asked for took effect, and its answer was not stored.
    assert config["config"]["permissions"]["unmatched"] == "ask"
    assert all(item["status"] != "completed" for item in inbox["items"])
    # Every refusal was recorded as an event.
    refusals = [e for e in events if e["type"] == "agent_refused"]
    assert {e["payload"]["method"] for e in refusals} >= {
        "config.update",
        "battle.approve",
        "inbox.list",
        "inbox.answer",
    }
    assert all(e["taskId"] == tasks[0] for e in refusals)


def test_who_a_process_is() -> None:
    """A person is never taken for an agent; a process with our mark but no live run's
    token (a left-behind process, say) is ours with no scope, whether a run is under way
    or not; a peer nobody can identify is no person; a run's scope ends with it."""
    owner = ProcessOwner.anonymous()
    scope = AgentScope("battle", "r", "001-x")
    env = {**os.environ, OWNER_VAR: owner.mark}
    wait = ["/bin/sh", "-c", "read -r line"]  # until a line comes
    with (
        subprocess.Popen(wait, stdin=subprocess.PIPE) as root,
        subprocess.Popen(wait, stdin=subprocess.PIPE, env=env) as ours,
        subprocess.Popen(wait, stdin=subprocess.PIPE) as person,
    ):
        try:
            with owner.track("t" * 32, scope) as run:
                owner.started_run(run, root.pid)  # the run's agent: no kin of the others
                assert owner.identify(root.pid) == scope
                assert owner.identify(person.pid) is None
                assert owner.identify(os.getpid()) is None
                assert owner.identify(None) == UNKNOWN_SCOPE
                assert owner.identify(ours.pid) == CHILD_SCOPE
            assert owner.runs == 0
            # No run under way: a person is a person, ours is still ours.
            assert owner.identify(person.pid) is None
            assert owner.identify(os.getpid()) is None
            assert owner.identify(ours.pid) == CHILD_SCOPE
        finally:
            for child in (root, ours, person):
                child.communicate(b"\n")
    # Gone (exited and reaped) before it was looked up: nobody can say it is a person.
    assert owner.identify(person.pid) == UNKNOWN_SCOPE
