"""A planning turn that cannot start its agent fails the session, never the daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import make_git_repo
from tests.inproc import running_daemon

pytestmark = pytest.mark.anyio


async def test_an_agent_that_cannot_start_fails_the_planning_session(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        # The command backend without agent.command: the agent cannot be started.
        await d.call(
            "config.update", {"repo": str(repo), "patch": {"agent": {"backend": "command"}}}
        )
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("planning.start", {"repo": str(repo), "idea": "a word counter"})
            events = await watcher.events_until({"planning_failed"})
        assert "agent.command" in events[-1]["payload"]["error"]
        status = await d.call("planning.status", {"repo": str(repo)})
        assert status["state"] == "idle" and "agent.command" in status["error"]
        assert await d.call("daemon.ping") == "pong"
