"""Races between clients, against a daemon in the test's own event loop.

Ten clients starting a battle in one repository at once get one battle; a cancel is
never lost to a pause that arrives at the same moment; a pause "now" that arrives as an
iteration begins, before its agent runs, still stops that iteration; two planning starts
get one session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphd.protocol.codes import ErrorCode
from tests.helpers import FAKES, make_git_repo
from tests.inproc import InProcDaemon, RpcError, running_daemon

pytestmark = pytest.mark.anyio


async def _setup(d: InProcDaemon, repo: Path, mode: str = "hang") -> str:
    await d.call("repo.register", {"path": str(repo)})
    await d.call(
        "config.update",
        {
            "repo": str(repo),
            "patch": {
                "agent": {
                    "backend": "claude",
                    "command": str(FAKES / "fake_claude"),
                    "env": {"FAKE_CLAUDE_MODE": mode},
                },
                "mode": "yolo",
                "feedbackLoops": ["test"],
                "feedbackCommands": {"test": "true"},
            },
        },
    )
    task = await d.call(
        "task.create",
        {
            "repo": str(repo),
            "title": "Make it work",
            "description": "Write work.txt",
            "acceptanceCriteria": ["work.txt exists"],
        },
    )
    return str(task["task"]["id"])


def _history(repo: Path, task: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (repo / ".pokeralph" / "battles" / task / "history.json").read_text()
    )
    return data


async def test_ten_clients_starting_at_once_get_one_battle(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        outcomes: list[Any] = []

        async def start() -> None:
            try:
                outcomes.append(await d.call("battle.start", {"repo": str(repo), "taskId": task}))
            except RpcError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(start)
        started = [o for o in outcomes if isinstance(o, dict)]
        refused = [o for o in outcomes if isinstance(o, RpcError)]
        assert len(started) == 1, outcomes
        assert len(refused) == 9
        assert {e.code for e in refused} == {int(ErrorCode.BATTLE_ACTIVE)}
        current = await d.call("battle.current", {"repo": str(repo)})
        assert len(current["battles"]) == 1
        await d.call("battle.cancel", {"repo": str(repo)})
        assert (await d.call("battle.current", {"repo": str(repo)}))["battles"] == []


@pytest.mark.parametrize("order", ["cancel_then_pause", "pause_then_cancel"])
async def test_a_cancel_is_never_lost_to_a_pause_now(home: Path, order: str) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            await watcher.events_until({"iteration_start"})
            results: dict[str, Any] = {}

            async def cancel() -> None:
                results["cancel"] = await d.call("battle.cancel", {"repo": str(repo)})

            async def pause() -> None:
                try:
                    results["pause"] = await d.call(
                        "battle.pause", {"repo": str(repo), "now": True}
                    )
                except RpcError as exc:
                    results["pause"] = exc

            first, second = (cancel, pause) if order == "cancel_then_pause" else (pause, cancel)
            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await anyio.lowlevel.checkpoint()
                tg.start_soon(second)
            events = await watcher.events_until({"battle_cancelled", "battle_paused"})
            assert events[-1]["type"] == "battle_cancelled", [e["type"] for e in events]
        assert results["cancel"]["battle"]["status"] == "cancelled"
        assert _history(repo, task)["status"] == "cancelled"
        assert (await d.call("battle.current", {"repo": str(repo)}))["battles"] == []
    # After a restart it stays cancelled: nothing comes back paused.
    async with running_daemon(home) as d:
        assert (await d.call("battle.current", {"repo": str(repo)}))["battles"] == []
        history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
        assert history["battle"]["status"] == "cancelled"


async def test_a_pause_now_as_the_iteration_begins_stops_that_iteration(home: Path) -> None:
    """``iteration_start`` is published before the agent starts (its prompt and the git
    snapshot come first): a pause "now" asked on that event must not wait for the whole
    iteration (it once did, when no agent run was under way to cancel yet)."""
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo, mode="complete")  # an iteration that would pass
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            await watcher.events_until({"iteration_start"})
            await d.call("battle.pause", {"repo": str(repo), "now": True})
            events = await watcher.events_until({"battle_paused", "battle_complete"})
        assert events[-1]["type"] == "battle_paused", [e["type"] for e in events]
        assert events[-1]["payload"]["reason"] == "paused immediately at your request"
        [iteration] = _history(repo, task)["iterations"]
        assert iteration["result"] == "cancelled"
        # Resumed, it runs a new iteration from the start (the "now" was not kept).
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.resume", {"repo": str(repo)})
            events = await watcher.events_until({"battle_paused", "battle_complete"})
        assert events[-1]["type"] == "battle_complete", [e["type"] for e in events]


async def test_two_planning_starts_at_once_get_one_session(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await _setup(d, repo)  # the agent hangs: the first session stays "planning"
        outcomes: list[Any] = []

        async def start() -> None:
            try:
                outcomes.append(
                    await d.call("planning.start", {"repo": str(repo), "breakdown": True})
                )
            except RpcError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(start)
        started = [o for o in outcomes if isinstance(o, dict)]
        assert len(started) == 1, outcomes
        assert all(
            isinstance(o, RpcError) and o.code == int(ErrorCode.INVALID_STATE)
            for o in outcomes
            if not isinstance(o, dict)
        )
        await d.call("planning.reset", {"repo": str(repo)})


async def test_a_new_prd_cannot_pull_the_task_from_under_a_battle(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        task = await _setup(d, repo)
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        prd = (await d.call("prd.get", {"repo": str(repo)}))["prd"]
        prd["tasks"][0]["status"] = "completed"
        with pytest.raises(RpcError) as info:
            await d.call("prd.update", {"repo": str(repo), "prd": prd})
        assert info.value.code == int(ErrorCode.BATTLE_ACTIVE)
        # Changing the name and description is fine.
        await d.call("prd.update", {"repo": str(repo), "name": "Renamed"})
        (current,) = (await d.call("battle.current", {"repo": str(repo)}))["battles"]
        assert current["taskId"] == task and current["status"] in ("pending", "running")
        await d.call("battle.cancel", {"repo": str(repo)})


async def test_a_taken_name_leaves_nothing_behind(home: Path) -> None:
    first = make_git_repo(home / "first")
    plain = home / "plain"
    plain.mkdir()
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(first), "name": "taken"})
        with pytest.raises(RpcError) as info:
            await d.call("repo.register", {"path": str(plain), "name": "taken", "gitInit": True})
        assert info.value.code == int(ErrorCode.INVALID_PARAMS)
        assert not (plain / ".git").exists()
