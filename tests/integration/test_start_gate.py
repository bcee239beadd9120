"""The start gate in a daemon (``startingRuns``): a battle's agent past the slots waits
for one before its process starts, ``daemon.status`` and ``pokeralphctl status`` say
how many wait, and each starts once the one before it has spoken; a battle lands (merges
back, removes its worktree) only with a slot.

The agent is quiet until a gate file appears (then it says it is done), and notes its
own start in a shared file: the second battle's agent is proved not started while the
first holds the only slot, by that file, not by timing.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pokeralphd.settings import DaemonSettings
from tests.helpers import make_git_repo, run_ctl
from tests.inproc import InProcDaemon, running_daemon

pytestmark = pytest.mark.anyio


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def one_loading_one_waiting(d: InProcDaemon, started: Path) -> dict[str, int]:
    """Once the first agent has noted its start and the second waits for the slot: the
    daemon's ``starts``."""
    with anyio.fail_after(30):
        while True:
            starts: dict[str, int] = (await d.call("daemon.status"))["starts"]
            if starts["waiting"] >= 1 and lines(started):
                return starts
            await anyio.sleep(0.01)


AGENT = """#!/bin/sh
cat > /dev/null
echo "$POKERALPH_TASK_ID" >> "{started}"
while [ ! -e "{gate}" ]; do sleep 0.01; done
echo "done <promise>COMPLETE</promise>"
"""


async def test_a_run_past_the_slots_waits_its_turn_and_status_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    started, gate = tmp_path / "started.txt", tmp_path / "gate"
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.format(started=started, gate=gate))
    agent.chmod(0o755)
    settings = DaemonSettings.model_validate({"startingRuns": 1, "maxConcurrentBattles": 4})
    async with running_daemon(home, settings) as d:
        start_gate = d.daemon.owner.start_gate
        assert start_gate is not None and start_gate.slots == 1
        start_gate.settle = 600.0  # the quiet agent keeps its slot until it speaks
        repo = make_git_repo(home / "repo")
        await d.call("repo.register", {"path": str(repo)})
        patch = {
            "agent": {"backend": "command", "command": str(agent), "env": {}},
            "mode": "yolo",
            "phases": ["implementation"],
            "feedbackLoops": ["none"],
            "parallelBattles": 2,
        }
        await d.call("config.update", {"repo": str(repo), "patch": patch})
        for title in ("First", "Second"):
            task = {"repo": str(repo), "title": title, "description": "d"}
            await d.call("task.create", {**task, "acceptanceCriteria": ["c"]})
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"types": ["battle_complete"]})
            await d.call("battle.start", {"repo": str(repo), "all": True})
            starts = await one_loading_one_waiting(d, started)
            assert starts == {"slots": 1, "starting": 1, "waiting": 1}
            assert len(lines(started)) == 1  # the second is not started
            env = {"POKERALPH_SOCKET": str(d.paths.socket), "NO_COLOR": "1"}
            said = await anyio.to_thread.run_sync(lambda: run_ctl(env, "status"))
            assert "runs loading: 1 of 1 at once, 1 waiting their turn to start" in said.stdout
            gate.touch()  # the first speaks, and the second starts
            await watcher.events_until({"battle_complete"}, timeout=60)
            await watcher.events_until({"battle_complete"}, timeout=60)
        assert len(lines(started)) == 2
        status = await d.call("daemon.status")
        assert status["starts"] == {"slots": 1, "starting": 0, "waiting": 0}
        said = await anyio.to_thread.run_sync(lambda: run_ctl(env, "status"))
        assert "runs loading" not in said.stdout


async def test_a_battle_cancelled_while_its_agent_waits_its_turn_starts_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    started, gate = tmp_path / "started.txt", tmp_path / "gate"
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.format(started=started, gate=gate))
    agent.chmod(0o755)
    settings = DaemonSettings.model_validate({"startingRuns": 1, "maxConcurrentBattles": 4})
    async with running_daemon(home, settings) as d:
        start_gate = d.daemon.owner.start_gate
        assert start_gate is not None
        start_gate.settle = 600.0
        repo = make_git_repo(home / "repo")
        await d.call("repo.register", {"path": str(repo)})
        patch = {
            "agent": {"backend": "command", "command": str(agent), "env": {}},
            "mode": "yolo",
            "phases": ["implementation"],
            "feedbackLoops": ["none"],
            "parallelBattles": 2,
        }
        await d.call("config.update", {"repo": str(repo), "patch": patch})
        ids = []
        for title in ("First", "Second"):
            task = {"repo": str(repo), "title": title, "description": "d"}
            ids.append(
                (await d.call("task.create", {**task, "acceptanceCriteria": ["c"]}))["task"]["id"]
            )
        async with d.client() as watcher:
            await watcher.call(
                "events.subscribe", {"types": ["battle_complete", "battle_cancelled"]}
            )
            await d.call("battle.start", {"repo": str(repo), "all": True})
            await one_loading_one_waiting(d, started)
            [running] = lines(started)
            [waiting] = [t for t in ids if t != running]
            await d.call("battle.cancel", {"repo": str(repo), "taskId": waiting})
            events = await watcher.events_until({"battle_cancelled"}, timeout=30)
            assert events[-1]["taskId"] == waiting
            status = await d.call("daemon.status")
            assert status["starts"] == {"slots": 1, "starting": 1, "waiting": 0}
            gate.touch()
            events = await watcher.events_until({"battle_complete"}, timeout=60)
            assert events[-1]["taskId"] == running
        assert lines(started) == [running]  # the cancelled one never started


async def test_a_battle_lands_only_with_a_slot(tmp_path: Path) -> None:
    """A battle whose agent is done merges back and removes its worktree (its landing)
    only with a slot of the gate: while the test holds the only one, the battle is not
    complete and status says one waits; given back, it completes."""
    home = tmp_path / "home"
    started, gate = tmp_path / "started.txt", tmp_path / "gate"
    agent = tmp_path / "agent.sh"
    speaking = AGENT.replace('>> "{started}"\n', '>> "{started}"\necho working\n')
    agent.write_text(speaking.format(started=started, gate=gate))
    agent.chmod(0o755)
    settings = DaemonSettings.model_validate({"startingRuns": 1})
    async with running_daemon(home, settings) as d:
        start_gate = d.daemon.owner.start_gate
        assert start_gate is not None
        start_gate.settle = 600.0
        repo = make_git_repo(home / "repo")
        await d.call("repo.register", {"path": str(repo)})
        patch = {
            "agent": {"backend": "command", "command": str(agent), "env": {}},
            "mode": "yolo",
            "phases": ["implementation"],
            "feedbackLoops": ["none"],
            "parallelBattles": 2,  # a worktree battle: it lands by merging back
        }
        await d.call("config.update", {"repo": str(repo), "patch": patch})
        task = {"repo": str(repo), "title": "Only", "description": "d"}
        made = await d.call("task.create", {**task, "acceptanceCriteria": ["c"]})
        task_id = made["task"]["id"]
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"types": ["iteration_end", "battle_complete"]})
            await d.call("battle.start", {"repo": str(repo), "taskId": task_id})
            with anyio.fail_after(30):  # the agent has spoken: the slot is free
                while not lines(started) or start_gate.starting:
                    await anyio.sleep(0.01)
            held = await start_gate.enter()  # the test takes the only slot
            gate.touch()  # the agent is done: the battle would land now
            await watcher.events_until({"iteration_end"}, timeout=30)
            with anyio.fail_after(30):
                while not start_gate.waiting:
                    await anyio.sleep(0.01)
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task_id})
            assert history["battle"]["status"] == "running"
            assert history["battle"]["worktree"]["merged"] is False
            assert (await d.call("daemon.status"))["starts"]["waiting"] == 1
            held.done()
            events = await watcher.events_until({"battle_complete"}, timeout=30)
            assert events[-1]["taskId"] == task_id
        assert start_gate.starting == 0
