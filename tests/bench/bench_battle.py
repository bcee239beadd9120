"""Battle overhead: wall time per iteration with an agent that answers at once and no
feedback loop to run, split into the daemon's own phases (from the iteration records)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from tests.bench.common import Table, start_daemon
from tests.helpers import events_of, make_git_repo

AGENT = Path(__file__).with_name("stream_agent.py")


def run(table: Table, iterations: int = 30) -> None:
    daemon = start_daemon()
    try:
        repo = make_git_repo(daemon.home / "repo")
        daemon.call("repo.register", {"path": str(repo)})
        daemon.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "mode": "yolo",
                    "agent": {
                        "backend": "claude",
                        "command": sys.executable,
                        "extraArgs": [],
                        "env": {},
                    },
                    "feedbackLoops": ["none"],
                    "autoCommit": True,
                },
            },
        )
        # The claude backend puts its flags first; a tiny wrapper script keeps argv simple.
        wrapper = daemon.home / "agent.sh"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {AGENT} instant "$@"\n')
        wrapper.chmod(0o755)
        daemon.call(
            "config.update", {"repo": str(repo), "patch": {"agent": {"command": str(wrapper)}}}
        )
        task = daemon.call(
            "task.create",
            {"repo": str(repo), "title": "Bench", "description": "d", "acceptanceCriteria": ["c"]},
        )["task"]["id"]
        with daemon.connect(timeout=300) as conn:
            conn.call(
                "events.subscribe",
                {"repo": str(repo), "types": ["battle_failed", "battle_complete"]},
            )
            daemon.call(
                "battle.start", {"repo": str(repo), "taskId": task, "maxIterations": iterations}
            )
            list(events_of(conn, lambda e: True, timeout=300))
        battle = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        records = battle["iterations"]
        walls = [r["durationMs"] for r in records]
        table.add(
            "battle iteration wall time, instant agent (median)",
            f"{statistics.median(walls):.1f} ms",
            f"{len(records)} iterations",
        )
        phases: dict[str, list[float]] = {}
        for r in records:
            for name, value in (r.get("timingsMs") or {}).items():
                phases.setdefault(name, []).append(value)
        own = [
            sum(v for k, v in (r.get("timingsMs") or {}).items() if k != "agent") for r in records
        ]
        for name, values in phases.items():
            table.add(f"  phase {name} (median)", f"{statistics.median(values):.1f} ms")
        if own:
            table.add(
                "battle overhead of our own per iteration (median)",
                f"{statistics.median(own):.1f} ms",
                "target <50 ms",
            )
    finally:
        daemon.stop()
