"""The start gate in a daemon (``startingRuns``): a battle's agent past the slots waits
for one before its process starts, ``daemon.status`` and ``pokeralphctl status`` say
how many wait, and each starts once the one before it has spoken; a battle lands (merges
back, removes its worktree) only with a slot.

The agent is quiet until a gate file appears (then it says it is done), and notes its
own start in a shared file: the second battle's agent is proved not started while the
first holds the only slot, by that file, not by timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from pokeralphd.settings import DaemonSettings
from pokeralphd.startgate import StartGate
from tests.helpers import make_git_repo, run_ctl
from tests.inproc import InProcDaemon, running_daemon

pytestmark = pytest.mark.anyio

AGENT = """#!/bin/sh
cat > /dev/null
echo "$POKERALPH_TASK_ID" >> "{started}"
{speak}
while [ ! -e "{gate}" ]; do sleep 0.01; done
echo "done <promise>COMPLETE</promise>"
"""


@dataclass
class Gated:
    """A daemon with one slot, a repository of worktree battles run by the agent above,
    and its tasks."""

    d: InProcDaemon
    gate: StartGate
    repo: Path
    tasks: list[str]
    started: Path  # each agent's task id, as it starts
    opened: Path  # the agents finish once this exists

    def lines(self) -> list[str]:
        return self.started.read_text().split() if self.started.exists() else []

    async def one_loading_one_waiting(self) -> dict[str, int]:
        """Once the first agent has noted its start and another run waits for the slot:
        the daemon's ``starts``."""
        with anyio.fail_after(30):
            while True:
                starts: dict[str, int] = (await self.d.call("daemon.status"))["starts"]
                if starts["waiting"] >= 1 and self.lines():
                    return starts
                await anyio.sleep(0.01)

    async def status_line(self) -> str:
        env = {"POKERALPH_SOCKET": str(self.d.paths.socket), "NO_COLOR": "1"}
        said = await anyio.to_thread.run_sync(lambda: run_ctl(env, "status"))
        return said.stdout


@asynccontextmanager
async def gated(tmp_path: Path, titles: list[str], *, speak: bool = False) -> AsyncIterator[Gated]:
    """``speak``: the agent prints a line as soon as it has started (it gives its slot
    back then); else it says nothing until it is done (it keeps its slot)."""
    home = tmp_path / "home"
    started, opened = tmp_path / "started.txt", tmp_path / "gate"
    agent = tmp_path / "agent.sh"
    agent.write_text(
        AGENT.format(started=started, gate=opened, speak="echo working" if speak else "")
    )
    agent.chmod(0o755)
    settings = DaemonSettings.model_validate({"startingRuns": 1, "maxConcurrentBattles": 4})
    async with running_daemon(home, settings) as d:
        gate = d.daemon.owner.start_gate
        assert gate is not None and gate.slots == 1
        gate.settle = 600.0  # a quiet agent keeps its slot until it speaks
        repo = make_git_repo(home / "repo")
        await d.call("repo.register", {"path": str(repo)})
        patch = {
            "agent": {"backend": "command", "command": str(agent), "env": {}},
            "mode": "yolo",
            "phases": ["implementation"],
            "feedbackLoops": ["none"],
            "parallelBattles": 2,  # worktree battles: each lands by merging back
        }
        await d.call("config.update", {"repo": str(repo), "patch": patch})
        tasks = []
        for title in titles:
            task = {"repo": str(repo), "title": title, "description": "d"}
            made = await d.call("task.create", {**task, "acceptanceCriteria": ["c"]})
            tasks.append(made["task"]["id"])
        yield Gated(d, gate, repo, tasks, started, opened)


async def test_a_run_past_the_slots_waits_its_turn_and_status_says_so(tmp_path: Path) -> None:
    async with gated(tmp_path, ["First", "Second"]) as g, g.d.client() as watcher:
        await watcher.call("events.subscribe", {"types": ["battle_complete"]})
        await g.d.call("battle.start", {"repo": str(g.repo), "all": True})
        starts = await g.one_loading_one_waiting()
        assert starts == {"slots": 1, "starting": 1, "waiting": 1}
        assert len(g.lines()) == 1  # the second is not started
        said = await g.status_line()
        assert "runs loading: 1 of 1 at once, 1 waiting their turn to start" in said
        g.opened.touch()  # the first speaks, and the second starts
        await watcher.events_until({"battle_complete"}, timeout=60)
        await watcher.events_until({"battle_complete"}, timeout=60)
        assert len(g.lines()) == 2
        status = await g.d.call("daemon.status")
        assert status["starts"] == {"slots": 1, "starting": 0, "waiting": 0}
        assert "runs loading" not in await g.status_line()


async def test_a_battle_cancelled_while_its_agent_waits_its_turn_starts_nothing(
    tmp_path: Path,
) -> None:
    async with gated(tmp_path, ["First", "Second"]) as g, g.d.client() as watcher:
        await watcher.call("events.subscribe", {"types": ["battle_complete", "battle_cancelled"]})
        await g.d.call("battle.start", {"repo": str(g.repo), "all": True})
        await g.one_loading_one_waiting()
        [running] = g.lines()
        [waiting] = [t for t in g.tasks if t != running]
        await g.d.call("battle.cancel", {"repo": str(g.repo), "taskId": waiting})
        events = await watcher.events_until({"battle_cancelled"}, timeout=30)
        assert events[-1]["taskId"] == waiting
        status = await g.d.call("daemon.status")
        assert status["starts"] == {"slots": 1, "starting": 1, "waiting": 0}
        g.opened.touch()
        events = await watcher.events_until({"battle_complete"}, timeout=60)
        assert events[-1]["taskId"] == running
        assert g.lines() == [running]  # the cancelled one never started


async def test_a_battle_lands_only_with_a_slot(tmp_path: Path) -> None:
    """A battle whose agent is done merges back and removes its worktree (its landing)
    only with a slot of the gate: while the test holds the only one, the battle is not
    complete and status says one waits; given back, it completes."""
    async with gated(tmp_path, ["Only"], speak=True) as g, g.d.client() as watcher:
        [task_id] = g.tasks
        await watcher.call("events.subscribe", {"types": ["iteration_end", "battle_complete"]})
        await g.d.call("battle.start", {"repo": str(g.repo), "taskId": task_id})
        with anyio.fail_after(30):  # the agent has spoken: the slot is free
            while not g.lines() or g.gate.starting:
                await anyio.sleep(0.01)
        held = await g.gate.enter()  # the test takes the only slot
        g.opened.touch()  # the agent is done: the battle would land now
        await watcher.events_until({"iteration_end"}, timeout=30)
        with anyio.fail_after(30):
            while not g.gate.waiting:
                await anyio.sleep(0.01)
        history = await g.d.call("battle.history", {"repo": str(g.repo), "taskId": task_id})
        assert history["battle"]["status"] == "running"
        assert history["battle"]["worktree"]["merged"] is False
        assert (await g.d.call("daemon.status"))["starts"]["waiting"] == 1
        held.done()
        events = await watcher.events_until({"battle_complete"}, timeout=30)
        assert events[-1]["taskId"] == task_id
        assert g.gate.starting == 0
