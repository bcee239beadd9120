"""Results built as structs by the services keep the wire's value types (issue 22): a
``float`` field is a JSON float even when nothing was spent yet, as it was when the
handlers converted the services' dicts (``msgspec.convert`` made ``0`` into ``0.0``;
a struct built by hand encodes what it is given)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.helpers import DaemonProcess, events_of
from tests.integration.battle_helpers import setup_repo

if TYPE_CHECKING:
    from pathlib import Path


def test_nothing_spent_is_a_float_on_the_wire(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "hang"})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "iteration_output"))
        current = daemon.call("battle.current", {"repo": str(repo)})["battles"][0]
        status = daemon.call("repo.status", {"repo": str(repo)})["battle"]
        spent = daemon.call("daemon.status")["spendToday"]
        total = daemon.call("cost.summary", {"by": "day"})["total"]
        daemon.call("battle.cancel", {"repo": str(repo)})
    for shown in (current, status, spent, total):
        assert shown["costUsd"] == 0 and isinstance(shown["costUsd"], float), shown
