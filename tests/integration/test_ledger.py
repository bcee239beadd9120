"""The cost ledger through a real daemon: its sums match the iterations recorded, they
survive a restart, and status and `pokeralphctl cost` show them."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import FAKES, make_git_repo, run_ctl
from tests.inproc import InProcDaemon, RpcError, running_daemon

pytestmark = pytest.mark.anyio


async def _battle(d: InProcDaemon, repo: Path, title: str, mode: str) -> str:
    created = await d.call(
        "task.create",
        {"repo": str(repo), "title": title, "description": "d", "acceptanceCriteria": ["c"]},
    )
    task = str(created["task"]["id"])
    await d.call(
        "config.update",
        {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": mode}}}},
    )
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        await watcher.events_until({"battle_complete", "battle_failed"})
    return task


async def _ctl(d: InProcDaemon, *args: str) -> dict[str, Any]:
    env = {**os.environ, "POKERALPH_SOCKET": str(d.paths.socket), "POKERALPH_NO_AUTOSTART": "1"}
    # on a worker thread: the daemon answers on this thread's event loop
    done = await anyio.to_thread.run_sync(functools.partial(run_ctl, env, "--json", *args))
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)["result"]
    return result


async def test_the_ledger_matches_the_iterations_and_survives_a_restart(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        await d.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "agent": {"backend": "claude", "command": str(FAKES / "fake_claude")},
                    "mode": "yolo",
                    "maxIterationsPerTask": 2,
                    "feedbackLoops": ["test"],
                    "feedbackCommands": {"test": "true"},
                },
            },
        )
        tasks = [
            await _battle(d, repo, "Done at once", "complete"),
            await _battle(d, repo, "Never done", "progress"),
        ]
        recorded: dict[str, float] = {}
        iterations = 0
        for task in tasks:
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
            iterations += len(history["battle"]["iterations"])
            # the battle's cost: its iterations, and the verifier's runs judging them
            recorded[f"{repo.name}/{task}"] = history["battle"]["costUsd"]
        assert iterations == 3
        before = await d.call("cost.summary", {"by": "task"})
        phases = await d.call("cost.summary", {"by": "phase"})
        status = await d.call("daemon.status")
        by_day = await _ctl(d, "cost")
        split = await d.call("cost.summary", {"by": "day", "split": "task"})
    by_task = {g["key"]: g["costUsd"] for g in before["groups"]}
    assert by_task == pytest.approx(recorded)
    runs = {g["key"]: g["iterations"] for g in phases["groups"]}
    assert runs == {"implementation": 3, "verification": 1}  # one claim to verify
    assert before["total"]["tokens"]["inputTokens"] == 100 * sum(runs.values())
    assert status["spendToday"]["costUsd"] == pytest.approx(sum(recorded.values()))
    [today] = by_day["groups"]
    assert today["iterations"] == 4
    [split_today] = split["groups"]
    assert split["split"] == "task" and split_today["key"] == today["key"]
    assert {p["key"]: p["costUsd"] for p in split_today["parts"]} == pytest.approx(recorded)

    async with running_daemon(home) as d:
        after = await d.call("cost.summary", {"by": "task"})
        backend = await d.call("cost.summary", {"by": "backend", "repo": str(repo)})
    assert after == before
    assert [g["key"] for g in backend["groups"]] == ["claude"]
    files = list((home / "state" / "pokeralph" / "ledger").iterdir())
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600


async def test_bad_cost_params_are_refused(home: Path) -> None:
    async with running_daemon(home) as d:
        for params, field in (
            ({"by": "week"}, "by"),
            ({"since": "2026-13"}, "since"),
            ({"since": "2026-11-23", "until": "2026-11-01"}, "since"),
            ({"by": "day", "split": "day"}, "split"),
            ({"split": "week"}, "split"),
        ):
            with pytest.raises(RpcError) as refused:
                await d.call("cost.summary", params)
            assert refused.value.code == -32602 and refused.value.data["field"] == field
