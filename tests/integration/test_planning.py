"""Planning round trip through the socket: two questions (one answered from the inbox),
the session resumed by id, an invalid PRD rejected with reasons, the final PRD saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pokeralphctl.client import RequestFailed
from tests.helpers import FAKES, DaemonProcess, events_of
from tests.inproc import ThreadedDaemon
from tests.integration.battle_helpers import printing_agent


def setup(daemon: DaemonProcess, repo: Path, home: Path, **env: str) -> Path:
    state = home / "planner"
    daemon.call("repo.register", {"path": str(repo)})
    daemon.call(
        "config.update",
        {
            "repo": str(repo),
            "patch": {
                "agent": {
                    "backend": "claude",
                    "command": str(FAKES / "fake_claude_planner"),
                    "env": {"FAKE_PLANNER_DIR": str(state), **env},
                }
            },
        },
    )
    return state


def test_planning_round_trip(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    state = setup(daemon, repo, home)
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        started = daemon.call(
            "planning.start", {"repo": str(repo), "idea": "a todo list for the terminal"}
        )
        assert started["state"] == "planning"
        first = list(events_of(conn, lambda e: e["type"] == "planning_question"))[-1]["payload"]
        assert "JSON file or SQLite" in first["question"]
        status = daemon.call("planning.status", {"repo": str(repo)})
        assert status["state"] == "waiting_input" and status["deliveryId"] == first["deliveryId"]
        # The first answer comes through the inbox, from "another client".
        daemon.call(
            "inbox.answer",
            {"id": first["deliveryId"], "values": {"values": {"answer": "A JSON file"}}},
        )
        second = list(events_of(conn, lambda e: e["type"] == "planning_question"))[-1]["payload"]
        assert "due dates" in second["question"]
        # The stale draft shown mid-turn did not win.
        assert daemon.call("planning.status", {"repo": str(repo)})["prd"] is None
        daemon.call("planning.answer", {"repo": str(repo), "answer": "No due dates"})
        done = list(events_of(conn, lambda e: e["type"] == "planning_completed"))[-1]["payload"]
    assert done["valid"] and done["prd"]["name"] == "Todo CLI"
    turns = [json.loads((state / f"turn-{n}.json").read_text()) for n in (1, 2, 3)]
    session = turns[1]["argv"][turns[1]["argv"].index("--resume") + 1]
    assert turns[2]["argv"][turns[2]["argv"].index("--resume") + 1] == session
    assert "A JSON file" in turns[1]["prompt"] and "No due dates" in turns[2]["prompt"]
    assert all("dontAsk" in t["argv"] and "plan" not in t["argv"] for t in turns)
    # The first question's inbox item is answered; the second one was settled by planning.answer.
    items = {i["id"]: i for i in daemon.call("inbox.list", {"repo": str(repo)})["items"]}
    assert items[first["deliveryId"]]["status"] == "completed"
    assert items[second["deliveryId"]]["status"] == "completed"
    preview = daemon.call("planning.finish", {"repo": str(repo)})
    assert preview["valid"] and not preview["saved"]
    assert daemon.call("prd.get", {"repo": str(repo)})["prd"] is None
    saved = daemon.call("planning.finish", {"repo": str(repo), "save": True})
    assert saved["saved"] and [t["id"] for t in saved["prd"]["tasks"]] == [
        "001-storage-layer",
        "002-add-and-list-commands",
    ]
    tasks = daemon.call("task.list", {"repo": str(repo)})["tasks"]
    assert [t["title"] for t in tasks] == ["Storage layer", "Add and list commands"]
    assert daemon.call("planning.status", {"repo": str(repo)})["state"] == "idle"


def test_invalid_prd_is_rejected_with_reasons(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    setup(daemon, repo, home, FAKE_PLANNER_PRD="invalid")
    with daemon.connect(timeout=60) as conn:
        conn.call(
            "events.subscribe",
            {"repo": str(repo), "types": ["planning_question", "planning_completed"]},
        )
        daemon.call("planning.start", {"repo": str(repo), "idea": "a todo list"})
        list(events_of(conn, lambda e: e["type"] == "planning_question"))
        daemon.call("planning.answer", {"repo": str(repo), "answer": "JSON"})
        list(events_of(conn, lambda e: e["type"] == "planning_question"))
        daemon.call("planning.answer", {"repo": str(repo), "answer": "no"})
        done = list(events_of(conn, lambda e: e["type"] == "planning_completed"))[-1]["payload"]
    assert not done["valid"]
    result = daemon.call("planning.finish", {"repo": str(repo), "save": True})
    assert result == {
        "valid": False,
        "saved": False,
        "problems": result["problems"],
        "prd": result["prd"],
    }
    assert result["problems"][0]["field"] == "tasks[1].acceptanceCriteria"
    assert daemon.call("prd.get", {"repo": str(repo)})["prd"] is None


def test_merge_keeps_existing_tasks_and_reset(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    setup(daemon, repo, home)
    daemon.call(
        "task.create",
        {"repo": str(repo), "title": "Existing", "description": "d", "acceptanceCriteria": ["c"]},
    )
    with daemon.connect(timeout=60) as conn:
        conn.call(
            "events.subscribe",
            {"repo": str(repo), "types": ["planning_question", "planning_completed"]},
        )
        daemon.call("planning.start", {"repo": str(repo), "idea": "more"})
        list(events_of(conn, lambda e: e["type"] == "planning_question"))
        with pytest.raises(RequestFailed) as info:
            daemon.call("planning.start", {"repo": str(repo), "idea": "again"})
        assert info.value.code == -32016
        daemon.call("planning.answer", {"repo": str(repo), "answer": "JSON"})
        list(events_of(conn, lambda e: e["type"] == "planning_question"))
        daemon.call("planning.answer", {"repo": str(repo), "answer": "no"})
        list(events_of(conn, lambda e: e["type"] == "planning_completed"))
    saved = daemon.call("planning.finish", {"repo": str(repo), "save": True, "merge": "merge"})
    assert [t["id"] for t in saved["prd"]["tasks"]] == [
        "001-existing",
        "002-storage-layer",
        "003-add-and-list-commands",
    ]
    assert daemon.call("planning.reset", {"repo": str(repo)})["state"] == "idle"
    with pytest.raises(RequestFailed):
        daemon.call("planning.answer", {"repo": str(repo), "answer": "x"})


def test_a_planning_session_survives_a_restart(home: Path, repo: Path) -> None:
    first = ThreadedDaemon(home).start()
    state = setup(first, repo, home)
    with first.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo), "types": ["planning_question"]})
        first.call("planning.start", {"repo": str(repo), "idea": "a todo list"})
        question = list(events_of(conn, lambda e: e["type"] == "planning_question"))[-1]["payload"]
    before = first.call("planning.status", {"repo": str(repo)})
    first.stop()
    second = ThreadedDaemon(home).start()
    try:
        after = second.call("planning.status", {"repo": str(repo)})
        assert after["state"] == "waiting_input" and after["sessionId"] == before["sessionId"]
        assert after["deliveryId"] == question["deliveryId"]
        with second.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"repo": str(repo), "types": ["planning_question"]})
            # Answered from the inbox after the restart: the same agent session goes on.
            second.call(
                "inbox.answer",
                {"id": question["deliveryId"], "values": {"values": {"answer": "JSON"}}},
            )
            nxt = list(events_of(conn, lambda e: e["type"] == "planning_question"))[-1]["payload"]
        assert "due dates" in nxt["question"]
        turn2 = json.loads((state / "turn-2.json").read_text())
        assert turn2["argv"][turn2["argv"].index("--resume") + 1] == before["sessionId"]
    finally:
        second.stop()


def test_a_plain_text_planners_prd_over_many_lines_is_read(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """A plain-text planning agent (the command backend) prints its PRD pretty-printed,
    over many lines. Its words arrive a line at a time and only the last line was read:
    the PRD was never found, and its closing tag came back as the agent's question."""
    prd = {
        "name": "Todo CLI",
        "description": "A command-line todo list.",
        "tasks": [
            {
                "title": "Storage layer",
                "description": "Load and save todos as JSON.",
                "acceptanceCriteria": ["round trip works"],
                "priority": 1,
            }
        ],
    }
    printed = f"Here is the plan.\n<prd>\n{json.dumps(prd, indent=2)}\n</prd>"
    script = printing_agent(home / "planner.sh", printed)
    daemon.call("repo.register", {"path": str(repo)})
    agent = {"backend": "command", "command": str(script)}
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": agent}})
    with daemon.connect(timeout=60) as conn:
        conn.call(
            "events.subscribe",
            {"repo": str(repo), "types": ["planning_question", "planning_completed"]},
        )
        daemon.call("planning.start", {"repo": str(repo), "idea": "a todo list"})
        done = list(events_of(conn, lambda e: e["type"].startswith("planning_")))[-1]
    assert done["type"] == "planning_completed", done
    assert done["payload"]["valid"] and done["payload"]["prd"]["name"] == "Todo CLI"
