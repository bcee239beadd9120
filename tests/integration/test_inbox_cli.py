"""The inbox from the terminal: an agent's blocking question answered from another client,
HITL approval through the inbox, planning from `pokeralphctl plan`."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.helpers import FAKES, DaemonProcess, events_of, run_ctl, wait_until
from tests.integration.battle_helpers import setup_repo, types


def test_agents_blocking_question_answered_from_another_client(
    daemon: DaemonProcess, repo: Path
) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    env = dict(daemon.env, POKERALPH_REPO_PATH=str(repo), POKERALPH_TASK_ID="001-x")
    asking = ThreadPoolExecutor(1)  # the agent's client waits on a thread of its own
    try:
        asker = asking.submit(
            run_ctl,
            env,
            "deliver",
            "--title",
            "Deploy where?",
            "--schema",
            "select",
            "--option",
            "staging",
            "--option",
            "production",
            "--blocking",
            "--timeout",
            "60",
        )
        items = wait_until(
            lambda: daemon.call("inbox.list", {"status": "open"})["items"], 20, "the question"
        )
        listed = daemon.ctl("inbox")
        assert "Deploy where?" in listed.stdout
        shown = daemon.ctl("inbox", "show", items[0]["id"])
        assert "staging, production" in shown.stdout
        bad = daemon.ctl("answer", items[0]["id"], "--value", "moon")
        assert bad.returncode == 1 and "choose one of" in bad.stderr
        good = daemon.ctl("answer", items[0]["id"], "--value", "staging", "--note", "prod tomorrow")
        assert good.returncode == 0, good.stderr
        asked = asker.result(timeout=30)
    finally:
        # not waited for: after a failure the blocked client ends as the daemon stops
        asking.shutdown(wait=False)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["status"] == "answered" and answer["answer"]["values"] == {"value": "staging"}
    assert answer["answer"]["note"] == "prod tomorrow"


def test_blocking_deliver_times_out_with_its_exit_code(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    result = daemon.ctl(
        "--repo",
        str(repo),
        "deliver",
        "--title",
        "ok?",
        "--schema",
        "confirm",
        "--blocking",
        "--timeout",
        "0.02",
    )
    assert result.returncode == 5
    item = daemon.call("inbox.list", {})["items"][0]
    assert item["status"] == "timeout"
    assert daemon.ctl("answer", item["id"], "--yes").returncode == 0
    assert daemon.call("inbox.get", {"id": item["id"]})["delivery"]["status"] == "completed"


def test_hitl_approval_through_the_inbox(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    record = home / "record"
    task = setup_repo(
        daemon,
        repo,
        mode="hitl",
        env={
            "FAKE_CLAUDE_MODE": "complete_after:3",
            "FAKE_CLAUDE_COUNTER": str(home / "c"),
            "FAKE_CLAUDE_RECORD": str(record),
        },
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        seen = list(events_of(conn, lambda e: e["type"] == "await_approval_delivery"))
        delivery_id = seen[-1]["payload"]["deliveryId"]
        item = daemon.call("inbox.get", {"id": delivery_id})
        assert (
            item["delivery"]["mode"] == "blocking"
            and item["delivery"]["feedbackSchema"]["type"] == "confirm"
        )
        assert "Feedback loops" in item["delivery"]["content"]["body"]
        assert (
            daemon.ctl("answer", delivery_id, "--yes", "--note", "rename the file").returncode == 0
        )
        rest = list(events_of(conn, lambda e: e["type"] == "await_approval_delivery"))
        second = rest[-1]["payload"]["deliveryId"]
        # Approving through battle.approve settles the inbox item too.
        daemon.call("battle.approve", {"repo": str(repo)})
        end = list(events_of(conn, lambda e: e["type"] in ("battle_complete", "battle_failed")))
    assert types(end)[-1] == "battle_complete"
    battle = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    assert battle["status"] == "completed"
    assert battle["iterations"][1]["approvalNote"] == "rename the file"  # it went into prompt 2
    assert daemon.call("inbox.get", {"id": second})["delivery"]["status"] == "completed"


def test_rejection_through_the_inbox_pauses(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, mode="hitl", env={"FAKE_CLAUDE_MODE": "progress"})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        delivery_id = list(events_of(conn, lambda e: e["type"] == "await_approval_delivery"))[-1][
            "payload"
        ]["deliveryId"]
        assert daemon.ctl("answer", delivery_id, "--no", "--note", "wrong approach").returncode == 0
        paused = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
    assert "wrong approach" in paused[-1]["payload"]["reason"]
    daemon.call("battle.cancel", {"repo": str(repo)})


def test_failed_battle_offers_a_retry(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "progress"}, maxIterationsPerTask=1)
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        offer = list(events_of(conn, lambda e: e["type"] == "new_delivery"))[-1]["payload"][
            "delivery"
        ]
        assert offer["feedbackSchema"]["options"] == ["retry with 6 iterations", "stop"]
        daemon.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}},
        )
        daemon.call(
            "inbox.answer", {"id": offer["id"], "values": {"value": "retry with 6 iterations"}}
        )
        end = list(events_of(conn, lambda e: e["type"] == "battle_complete"))
    assert end[-1]["taskId"] == task


def test_plan_from_the_terminal(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    daemon.call(
        "config.update",
        {
            "repo": str(repo),
            "patch": {
                "agent": {
                    "command": str(FAKES / "fake_claude_planner"),
                    "env": {"FAKE_PLANNER_DIR": str(home / "p")},
                }
            },
        },
    )
    first = daemon.ctl("--repo", str(repo), "plan", "a todo list", "--answer", "JSON file")
    assert first.returncode == 6 and "due dates" in first.stdout
    second = daemon.ctl("--repo", str(repo), "plan", "--answer", "no", "--yes")
    assert second.returncode == 0, second.stderr
    assert "saved 2 tasks" in second.stdout
    assert [t["id"] for t in daemon.call("task.list", {"repo": str(repo)})["tasks"]] == [
        "001-storage-layer",
        "002-add-and-list-commands",
    ]
