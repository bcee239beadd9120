"""Detection latency: from an agent printing a line to a subscriber receiving the
``iteration_output`` event that carries it (coalescing window included)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.bench.common import Table, pct, start_daemon
from tests.helpers import make_git_repo

AGENT = Path(__file__).with_name("stream_agent.py")


def run(table: Table, lines: int = 200) -> None:
    daemon = start_daemon()
    try:
        repo = make_git_repo(daemon.home / "repo")
        daemon.call("repo.register", {"path": str(repo)})
        wrapper = daemon.home / "agent.sh"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {AGENT} stamped:{lines} "$@"\n')
        wrapper.chmod(0o755)
        daemon.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "mode": "yolo",
                    "feedbackLoops": ["none"],
                    "autoCommit": False,
                    "agent": {"command": str(wrapper)},
                },
            },
        )
        task = daemon.call(
            "task.create",
            {
                "repo": str(repo),
                "title": "Latency",
                "description": "d",
                "acceptanceCriteria": ["c"],
            },
        )["task"]["id"]
        delays: list[float] = []
        with daemon.connect(timeout=120) as conn:
            conn.call(
                "events.subscribe",
                {"repo": str(repo), "types": ["iteration_output", "iteration_end"]},
            )
            daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1})
            conn.settimeout(120)
            for message in conn.messages():
                params = message.get("params", {})
                if params.get("type") == "iteration_end":
                    break
                now = time.time()
                for chunk in params.get("payload", {}).get("chunks", []):
                    if chunk["kind"] == "text" and chunk["text"].startswith("STAMP "):
                        delays.append(now - float(chunk["text"].split()[1]))
        table.add(
            "agent line → iteration_output p50 / p99",
            f"{pct(delays, 50) * 1000:.1f} / {pct(delays, 99) * 1000:.1f} ms",
            f"{len(delays)} lines; target p50 <25 ms (seed polled every 2 s)",
        )
    finally:
        daemon.stop()
