"""Helpers for battle tests: a registered repository wired to a fake agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import FAKES, DaemonProcess, events_of, wait_until


def setup_repo(
    daemon: DaemonProcess,
    repo: Path,
    *,
    backend: str = "claude",
    fake: str = "fake_claude",
    env: dict[str, str] | None = None,
    loops: dict[str, str] | None = None,
    **config: Any,
) -> str:
    """Register ``repo``, add one task, point the agent at a fake; returns the task id."""
    daemon.call("repo.register", {"path": str(repo)})
    agent: dict[str, Any] = {"backend": backend, "env": env or {}}
    if fake:
        agent["command"] = str(FAKES / fake)
    patch: dict[str, Any] = {
        "agent": agent,
        "mode": "yolo",
        "feedbackLoops": list((loops or {"test": "true"}).keys()),
        "feedbackCommands": loops or {"test": "true"},
        "idleTimeoutMinutes": 1,
        "timeoutMinutes": 1,
    }
    patch.update(config)
    daemon.call("config.update", {"repo": str(repo), "patch": patch})
    task = daemon.call(
        "task.create",
        {
            "repo": str(repo),
            "title": "Make it work",
            "description": "Write work.txt",
            "acceptanceCriteria": ["work.txt exists", "tests pass"],
        },
    )["task"]
    return str(task["id"])


def run_until(
    daemon: DaemonProcess,
    start: tuple[str, dict[str, Any]] | None,
    done: set[str],
    repo: str | None = None,
    timeout: float = 60,
) -> list[dict[str, Any]]:
    """Subscribe, optionally make a call, and collect events until one of ``done`` types."""
    with daemon.connect(timeout=timeout) as conn:
        params: dict[str, Any] = {}
        if repo:
            params["repo"] = repo
        conn.call("events.subscribe", params)
        if start is not None:
            with daemon.connect() as other:
                other.call(*start)
        return list(events_of(conn, lambda e: e["type"] in done, timeout=timeout))


def types(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["type"]
        for e in events
        if e["type"] not in ("iteration_output", "progress_update", "task_updated")
    ]


def agent_pids(pidfile: Path) -> list[int]:
    """The fake agent's pid and its setsid grandchild's, once it has written both."""
    wait_until(
        lambda: pidfile.exists() and len(pidfile.read_text().split()) >= 2, 20, "the agent's pids"
    )
    return [int(x) for x in pidfile.read_text().split()]
