"""The terminal dashboard driven headless by Textual's pilot against a real daemon.

``dashboard`` runs :class:`~pokeralphctl.tui.app.DashboardApp` on the in-process daemon's
socket; :func:`until` waits for a condition the way a person would, by letting the app
run (``pilot.pause``) until it holds or a deadline passes. Screenshots (SVG) go to
tests/tui/screenshots/ (gitignored; ``$POKERALPH_SCREENSHOTS`` wins).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.helpers import LazyModule

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from pokeralphctl.tui import views as views
    from pokeralphctl.tui.app import DashboardApp

    AppPilot = Pilot[None]
else:  # Textual is imported by the worker that runs the TUI's tests (see ONE_WORKER)
    views = LazyModule("pokeralphctl.tui.views")

SCREENSHOTS = Path(os.environ.get("POKERALPH_SCREENSHOTS") or Path(__file__).parent / "screenshots")
TIMEOUT = 60.0
SIZE = (140, 40)


@asynccontextmanager
async def dashboard(socket: str | Path) -> AsyncIterator[tuple[DashboardApp, AppPilot]]:
    """The app on ``socket``, headless, at a fixed size."""
    from pokeralphctl.tui.app import DashboardApp
    from pokeralphctl.tui.link import Link

    app = DashboardApp(Link(str(socket)))
    async with app.run_test(size=SIZE) as pilot:
        yield app, pilot


async def until(
    pilot: AppPilot, condition: Callable[[], Any], what: str, timeout: float = TIMEOUT
) -> Any:
    """Let the app run until ``condition()`` is truthy (its value), or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def type_text(pilot: AppPilot, text: str) -> None:
    await pilot.press(*("space" if c == " " else c for c in text))


def shot(app: DashboardApp, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return Path(app.save_screenshot(f"{name}.svg", str(SCREENSHOTS)))


def status_line(app: DashboardApp) -> str:
    return app.query_one(views.StatusLine).plain


def output_text(app: DashboardApp) -> str:
    return "\n".join(strip.text for strip in app.query_one(views.OutputPane).lines)


def battle_cell(app: DashboardApp, repo: str, task: str, column: int) -> str | None:
    """A cell of a battle's row (0 repo, 1 task, 2 status, 3 iteration), None: no row."""
    table = app.query_one(views.BattleTable)
    key = f"{repo}\0{task}"
    if key not in table.rows:
        return None
    return str(table.get_row(key)[column])


def inbox_ids(app: DashboardApp) -> list[str]:
    table = app.query_one(views.InboxTable)
    return [str(table.get_row(key)[1]) for key in table.rows]
