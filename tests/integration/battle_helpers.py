"""Helpers for battle tests: a registered repository wired to a fake agent."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pokeralphctl.client import Connection
from tests.fakeclock import FakeClock
from tests.helpers import FAKES, DaemonProcess, events_of, wait_until
from tests.inproc import ThreadedDaemon


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


def output_texts(events: list[dict[str, Any]], kind: str) -> list[str]:
    """The text of every ``iteration_output`` chunk of ``kind`` (notice, text, tool_use)
    among ``events``."""
    return [
        c["text"]
        for e in events
        if e["type"] == "iteration_output"
        for c in e["payload"]["chunks"]
        if c["kind"] == kind
    ]


def printing_agent(script: Path, printed: str) -> Path:
    """A plain-text agent at ``script``: it reads its prompt, then prints ``printed``
    as it is (a heredoc), a line at a time as any command does."""
    script.write_text(f"#!/bin/sh\ncat > /dev/null\ncat <<'EOF'\n{printed}\nEOF\n")
    script.chmod(0o755)
    return script


def agent_pids(pidfile: Path) -> list[int]:
    """The fake agent's pid and its setsid grandchild's, once it has written both."""
    wait_until(
        lambda: pidfile.exists() and len(pidfile.read_text().split()) >= 2, 20, "the agent's pids"
    )
    return [int(x) for x in pidfile.read_text().split()]


def fake_clock(daemon: DaemonProcess, start: float | None = None) -> FakeClock:
    """Put a FakeClock under the daemon's battle engine (made on the daemon's loop): run
    timeouts, idle watchdogs and rate-limit pauses then wait for :func:`advance_to`.
    ``start`` (e.g. ``time.time()``) for a fake agent that stamps real times."""
    assert isinstance(daemon, ThreadedDaemon) and daemon.daemon is not None
    make = FakeClock if start is None else functools.partial(FakeClock, start)
    clock: FakeClock = daemon.portal.call(make)
    daemon.daemon.battles.clock = clock
    return clock


def advance_to(daemon: DaemonProcess, clock: FakeClock, when: float) -> None:
    """Once the battle sleeps until ``when`` on ``clock``, move the clock there."""
    assert isinstance(daemon, ThreadedDaemon)

    def sleeping() -> bool:
        return any(abs(deadline - when) < 1e-3 for deadline, _ in clock._sleepers)

    wait_until(lambda: daemon.portal.call(sleeping), 20, f"a sleeper until {when}")
    daemon.portal.call(clock.advance, when - clock.time())


def start_until_blocked(daemon: DaemonProcess, conn: Connection, repo: Path, task: str) -> Any:
    """Subscribe ``conn``, start the battle (one iteration), and wait for it to be blocked:
    the ``battle_blocked`` payload."""
    conn.call("events.subscribe", {"repo": str(repo)})
    daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1})
    return list(events_of(conn, lambda e: e["type"] == "battle_blocked"))[-1]["payload"]
