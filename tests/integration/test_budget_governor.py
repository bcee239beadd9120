"""One budget and one governor for every battle: spending caps pause a battle before the
run that would pass them (and ask a person), and a rate limit seen by one battle holds the
others on the same endpoint until the reset, then lets them go in priority order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DaemonProcess, events_of, make_git_repo
from tests.integration.battle_helpers import advance_to, fake_clock, setup_repo, types
from tests.integration.test_agent_failures import SLOW, set_mode

END = {"battle_complete", "battle_failed", "battle_cancelled"}
COST = 0.0125  # what one fake_claude run costs


def _budget_item(daemon: DaemonProcess, repo: Path) -> dict[str, Any]:
    items = daemon.call("inbox.list", {"repo": str(repo), "status": "open"})["items"]
    deliveries = [daemon.call("inbox.get", {"id": i["id"]})["delivery"] for i in items]
    [item] = [d for d in deliveries if d["source"]["kind"] == "battle_budget"]
    found: dict[str, Any] = item
    return found


def test_a_battle_cap_pauses_before_the_run_that_would_pass_it(
    daemon: DaemonProcess, repo: Path
) -> None:
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "progress"},
        phases=["implementation"],
        budget={"perBattleUsd": 0.02},
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 10})
        events = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        [over] = [e["payload"] for e in events if e["type"] == "budget_exceeded"]
        assert over["cap"] == "perBattleUsd" and over["limitUsd"] == 0.02
        assert over["spentUsd"] == pytest.approx(COST) and over["nextUsd"] == pytest.approx(COST)
        assert "budget.perBattleUsd" in events[-1]["payload"]["reason"]
        assert types(events).count("iteration_start") == 1  # the second never started
        item = _budget_item(daemon, repo)
        raise_it, stop = item["feedbackSchema"]["options"]
        assert raise_it == "raise budget.perBattleUsd to $0.05 and go on"
        daemon.call("inbox.answer", {"id": item["id"], "values": {"value": raise_it}})
        # Raised to $0.05: two more runs fit ($0.0375, then $0.05 is not more), the next not.
        more = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        assert types(more).count("iteration_start") == 3
        config = daemon.call("config.get", {"repo": str(repo)})["config"]
        assert config["budget"]["perBattleUsd"] == 0.05
        again = _budget_item(daemon, repo)
        daemon.call("inbox.answer", {"id": again["id"], "values": {"value": stop}})
        last = list(events_of(conn, lambda e: e["type"] in END))
    assert types(last)[-1] == "battle_cancelled"


def test_a_raise_goes_where_it_takes_effect_when_the_repository_is_not_trusted(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """The cap is the user's, and the repository's file has an untrusted sensitive key: a
    raise written there would be ignored and the battle would stop again at once. It goes
    to the user's config, and the battle goes on."""
    from pokeralph_core.config import layers as config_layers
    from pokeralphd.store import config_writes
    from tests.inproc import paths_for

    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "progress"}, phases=["implementation"])
    user_file = paths_for(home).user_config_file
    agent = daemon.call("config.get", {"repo": str(repo)})["config"]["agent"]
    # what the repository's layer sets that loosens (its agent, yolo) waits once it is
    # edited: the user's layer says it too
    mine = {"agent": agent, "mode": "yolo", "budget": {"perBattleUsd": 0.02}}
    config_writes.update_user_layer(user_file, mine)
    repo_file = repo / ".pokeralph" / "config.json"
    edited = json.loads(repo_file.read_text())
    edited["budget"] = {"perRepoPerDayUsd": 100}  # a hand edit no one trusted
    repo_file.write_text(json.dumps(edited))
    assert not daemon.call("config.get", {"repo": str(repo)})["trust"]["trusted"]
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 10})
        paused = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        assert "budget_exceeded" in types(paused)
        item = _budget_item(daemon, repo)
        daemon.call(
            "inbox.answer",
            {"id": item["id"], "values": {"value": item["feedbackSchema"]["options"][0]}},
        )
        more = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        assert types(more).count("iteration_start") == 3  # up to $0.05, as in the test above
        daemon.call("battle.cancel", {"repo": str(repo)})
    assert config_layers.read_layer(user_file)[0]["budget"] == {"perBattleUsd": 0.05}
    assert json.loads(repo_file.read_text())["budget"] == {"perRepoPerDayUsd": 100}


def test_a_daily_cap_counts_every_battle_in_the_ledger(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    first = setup_repo(daemon, repo, phases=["implementation"], budget={"perDayUsd": 0.02})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {})
        daemon.call("battle.start", {"repo": str(repo), "taskId": first})
        list(events_of(conn, lambda e: e["type"] in END))
        # Another repository, the same daily cap: today's $0.0125 plus the next run's
        # ~$0.0125 would pass it after its first run.
        other = make_git_repo(tmp_path / "other")
        task = setup_repo(
            daemon,
            other,
            env={"FAKE_CLAUDE_MODE": "progress"},
            phases=["implementation"],
            budget={"perDayUsd": 0.02},
        )
        daemon.call("battle.start", {"repo": str(other), "taskId": task, "maxIterations": 5})
        events = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
    [over] = [e["payload"] for e in events if e["type"] == "budget_exceeded"]
    assert over["cap"] == "perDayUsd" and over["spentUsd"] == pytest.approx(2 * COST)
    spent = daemon.call("daemon.status")["spendToday"]["costUsd"]
    assert spent == pytest.approx(2 * COST)


def test_one_battles_rate_limit_holds_the_others_until_the_reset(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    clock = fake_clock(daemon)
    # B: the important one (priority 1), waiting for approval between iterations.
    b_repo = make_git_repo(tmp_path / "b")
    b = setup_repo(
        daemon,
        b_repo,
        env={"FAKE_CLAUDE_MODE": "progress"},
        mode="hitl",
        phases=["implementation"],
        **SLOW,
    )
    # A: less important (priority 5); its agent hits a 429 (no reset named: 60 s).
    a = setup_repo(
        daemon, repo, env={"FAKE_CLAUDE_MODE": "api_429"}, phases=["implementation"], **SLOW
    )
    daemon.call("task.update", {"repo": str(repo), "taskId": a, "priority": 5})
    start = clock.time()
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {})
        daemon.call("battle.start", {"repo": str(b_repo), "taskId": b, "maxIterations": 5})
        list(events_of(conn, lambda e: e["type"] == "await_approval"))
        daemon.call("battle.start", {"repo": str(repo), "taskId": a, "maxIterations": 3})
        blocked_a = list(events_of(conn, lambda e: e["type"] == "battle_blocked"))[-1]
        assert blocked_a["taskId"] == a and blocked_a["payload"]["retryAt"] == start + 60
        set_mode(daemon, repo, "complete")
        # B's next run would hit the same endpoint: it waits, blocked, naming A's limit.
        daemon.call("battle.approve", {"repo": str(b_repo)})
        blocked_b = list(events_of(conn, lambda e: e["type"] == "battle_blocked"))[-1]
        assert blocked_b["taskId"] == b
        assert f"seen by the battle of {repo.name}/{a}" in blocked_b["payload"]["reason"]
        assert blocked_b["payload"]["retryAt"] == start + 60
        shown = daemon.call("battle.current", {})["battles"]
        assert [x["status"] for x in shown] == ["blocked", "blocked"]
        # The reset: B (priority 1) goes first; A goes 2 s later.
        advance_to(daemon, clock, start + 60)
        went = list(events_of(conn, lambda e: e["type"] == "iteration_start"))
        assert went[-1]["repo"] == b_repo.name
        advance_to(daemon, clock, start + 62)
        rest = list(events_of(conn, lambda e: e["type"] == "battle_complete"))
    starts = [e["repo"] for e in went + rest if e["type"] == "iteration_start"]
    assert starts[-2:] == [b_repo.name, repo.name]
    assert rest[-1]["repo"] == repo.name
