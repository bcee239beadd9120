"""``pokeralphctl tui`` headless (Textual's pilot) against a real daemon running demo battles.

Each test drives the app by keys only, as a person would, and checks the daemon's own
record of what the keys did (battle.history, inbox.get), not just the screen.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.commands.demo import TASK_ID
from tests.helpers import BUG_FORM
from tests.inproc import ThreadedDaemon
from tests.tui.conftest import (
    battle_cell,
    dashboard,
    inbox_ids,
    output_text,
    shot,
    status_line,
    type_text,
    until,
    views,
)
from tests.web.conftest import demo_repo

pytestmark = pytest.mark.anyio


def history(daemon: ThreadedDaemon, repo: Path) -> dict[str, Any]:
    battle: dict[str, Any] = daemon.call("battle.history", {"repo": str(repo), "taskId": TASK_ID})[
        "battle"
    ]
    return battle


async def test_a_hitl_battle_shows_live_and_is_approved_by_keys_with_a_note(
    daemon: ThreadedDaemon, home: Path
) -> None:
    repo = demo_repo(daemon, home / "demo")
    async with dashboard(daemon.socket) as (app, pilot):
        await until(pilot, lambda: "connected" in status_line(app), "the stream")
        daemon.call("battle.start", {"repo": str(repo), "taskId": TASK_ID})
        await until(pilot, lambda: battle_cell(app, repo.name, TASK_ID, 1), "the battle's row")
        # The agent's lines arrive as iteration_output events, in the output pane.
        await until(pilot, lambda: "Implemented word_count" in output_text(app), "live output")
        await until(
            pilot,
            lambda: battle_cell(app, repo.name, TASK_ID, 2) == "awaiting_approval",
            "the approval wait",
        )
        # the approval is an inbox item too
        await until(pilot, lambda: "inbox 1 waiting" in status_line(app), "the approval item")
        shot(app, "battle")

        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, views.NoteScreen), "the note prompt")
        await type_text(pilot, "top_words next, please")
        shot(app, "approve-note")
        await pilot.press("enter")

        def noted() -> bool:
            notes = [it.get("approvalNote") for it in history(daemon, repo)["iterations"]]
            return "top_words next, please" in notes

        await until(pilot, noted, "the note in the battle's history")

        # The battle goes on: iteration 2, which ends the task (approved without a note if
        # the daemon asks again).
        def status() -> str | None:
            return battle_cell(app, repo.name, TASK_ID, 2)

        await until(pilot, lambda: "iteration 2" in output_text(app), "iteration 2")
        await until(pilot, lambda: status() in ("awaiting_approval", "completed"), "its end")
        if status() == "awaiting_approval":
            await pilot.press("a", "enter")
        await until(
            pilot, lambda: battle_cell(app, repo.name, TASK_ID, 2) == "completed", "the end"
        )
        assert history(daemon, repo)["status"] == "completed"
        assert "── completed ──" in output_text(app)
        await until(pilot, lambda: "today $" in status_line(app), "spend today")
        shot(app, "completed")


async def test_answer_a_select_item_through_its_generated_form(
    daemon: ThreadedDaemon, repo: Path
) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    schema = {"type": "select", "prompt": "Deploy where?", "options": ["staging", "production"]}
    created = daemon.call(
        "inbox.create",
        {"repo": str(repo), "title": "Deploy", "body": "Ready to ship.", "schema": schema},
    )
    item = created["delivery"]["id"]
    async with dashboard(daemon.socket) as (app, pilot):
        await until(pilot, lambda: item in inbox_ids(app), "the item in the inbox")
        await pilot.press("i", "enter")
        await until(pilot, lambda: app.screen.query("#value"), "the answer form")
        await pilot.press("ctrl+s")  # nothing chosen: the daemon's error shows at the field
        await until(
            pilot,
            lambda: "choose one of" in str(app.screen.query_one("#error-value").render()),
            "the daemon's error at the field",
        )
        assert daemon.call("inbox.get", {"id": item})["feedback"] == []
        await pilot.press("down", "enter")  # the second option, by keys
        await pilot.press("tab")  # to the note
        await type_text(pilot, "after lunch")
        shot(app, "inbox-select")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: item not in inbox_ids(app), "the answered item to go")
        (feedback,) = daemon.call("inbox.get", {"id": item})["feedback"]
        assert feedback["values"] == {"value": "production"}
        assert feedback["note"] == "after lunch"


async def test_pause_resume_and_cancel_by_keys(daemon: ThreadedDaemon, home: Path) -> None:
    repo = demo_repo(daemon, home / "demo", mode="yolo")
    # Slow enough that each key lands while an iteration runs.
    daemon.call(
        "config.update",
        {"repo": str(repo), "patch": {"agent": {"extraArgs": ["--pace", "0.3"]}}},
    )
    async with dashboard(daemon.socket) as (app, pilot):
        await until(pilot, lambda: "connected" in status_line(app), "the stream")
        daemon.call("battle.start", {"repo": str(repo), "taskId": TASK_ID})

        def status() -> str | None:
            return battle_cell(app, repo.name, TASK_ID, 2)

        await until(pilot, lambda: status() == "running", "the battle to run")
        await pilot.press("p")
        await until(pilot, lambda: status() == "paused", "the pause (after the iteration)")
        assert history(daemon, repo)["status"] == "paused"
        shot(app, "paused")
        await pilot.press("u")
        await until(pilot, lambda: status() == "running", "the resumed battle")
        await pilot.press("x")
        await pilot.press("y")
        await until(pilot, lambda: status() == "cancelled", "the cancel")
        assert history(daemon, repo)["status"] == "cancelled"


async def test_a_dead_daemon_is_a_status_line_and_a_restart_reconnects(
    daemon: ThreadedDaemon, repo: Path
) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    async with dashboard(daemon.socket) as (app, pilot):
        await until(pilot, lambda: "● connected" in status_line(app), "the stream")
        daemon.stop()
        await until(pilot, lambda: "not connected" in status_line(app), "the lost daemon")
        # the next attempt finds nobody: the line says so, and how to start one
        await until(pilot, lambda: "is not running" in status_line(app), "the retry's reason")
        await pilot.press("question_mark")  # the app still answers keys
        await until(pilot, lambda: isinstance(app.screen, views.HelpScreen), "the help overlay")
        shot(app, "help-no-daemon")
        await pilot.press("escape")
        daemon.start()
        await until(pilot, lambda: "the daemon restarted" in status_line(app), "the reconnection")
        # Events of the new daemon arrive: an item delivered now shows up.
        created = daemon.call(
            "inbox.create",
            {"repo": str(repo), "title": "After the restart", "schema": {"type": "confirm"}},
        )
        await until(
            pilot, lambda: created["delivery"]["id"] in inbox_ids(app), "the new daemon's item"
        )


async def test_the_app_starts_without_a_daemon(home: Path) -> None:
    async with dashboard(home / "nobody.sock") as (app, pilot):
        await until(pilot, lambda: "not running" in status_line(app), "the status line")
        assert app.is_running
        await pilot.press("a")  # no battle: a warning, not a crash
        assert app.is_running


def test_python_version_is_supported() -> None:
    assert sys.version_info >= (3, 11)


async def test_answer_a_form_item_field_by_field(daemon: ThreadedDaemon, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    schema = BUG_FORM
    created = daemon.call("inbox.create", {"repo": str(repo), "title": "Triage", "schema": schema})
    item = created["delivery"]["id"]
    async with dashboard(daemon.socket) as (app, pilot):
        await until(pilot, lambda: item in inbox_ids(app), "the item in the inbox")
        await pilot.press("i", "enter")
        await until(pilot, lambda: app.screen.query("#field-priority"), "the form")
        await pilot.press("ctrl+s")  # priority is required: said at the field
        await until(
            pilot,
            lambda: "required" in str(app.screen.query_one("#error-values-priority").render()),
            "the required field's error",
        )
        await pilot.press("down", "enter", "tab")  # P1
        await type_text(pilot, "2.5")
        await pilot.press("tab")
        await type_text(pilot, "crashes on tabs")
        await pilot.press("tab", "space")  # the checkbox
        shot(app, "inbox-form")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: item not in inbox_ids(app), "the answered item to go")
        (feedback,) = daemon.call("inbox.get", {"id": item})["feedback"]
        assert feedback["values"] == {
            "values": {
                "priority": "P1",
                "hours": 2.5,
                "details": "crashes on tabs",
                "blocker": True,
            }
        }


async def test_reports_that_come_as_the_app_closes_are_dropped(home: Path) -> None:
    """A worker's report (a reload's answer, the stream lost, an event) that arrives after
    the screen's widgets are gone, as the app closes under a test or a person's q, is
    dropped, and still counted as handled: each failed the app with NoMatches."""
    from pokeralphctl.tui.bridge import Call  # Textual: see tests/tui/conftest.py

    handled: list[str] = []
    async with dashboard(home / "no-daemon.sock") as (app, pilot):
        await until(pilot, lambda: "daemon" in status_line(app), "the status line")
        await app.screen.remove_children()  # what closing does before the last messages
        for callback, args in (
            (app._loaded, (None,)),
            (app.on_link_lost, ("gone",)),
            (app.on_daemon_event, ({"type": "iteration_start", "payload": {}},)),
        ):
            app.post_message(Call(callback, *args, done=lambda: handled.append("done")))
        await until(pilot, lambda: len(handled) == 3, "the reports handled")
