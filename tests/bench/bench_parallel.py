"""Parallel battles (issue 14): 20 battles of one repository, each in its own git
worktree, started with ``battle.start all`` and an agent that writes one file and
completes at once. Prints battles per minute, our overhead per iteration (the daemon's
own phases, from the iteration records), and what a battle costs around its iteration
(worktree, merge back, removal)."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from tests.bench.common import Table
from tests.helpers import SettingsDaemon, events_of, make_git_repo, short_tmpdir

AGENT = """\
import os, sys
from pathlib import Path
sys.stdin.read()
task = os.environ["POKERALPH_TASK_ID"]
Path(task + ".txt").write_text(task + "\\n")
print("done <promise>COMPLETE</promise>")
"""


def run(table: Table, battles: int = 20, parallel: int = 8) -> None:
    home = short_tmpdir("prp")
    daemon = SettingsDaemon(home, {"maxConcurrentBattles": parallel}).start()
    try:
        repo = make_git_repo(home / "repo")
        script = home / "agent.py"
        script.write_text(AGENT)
        wrapper = home / "agent.sh"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
        wrapper.chmod(0o755)
        daemon.call("repo.register", {"path": str(repo)})
        daemon.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "mode": "yolo",
                    "agent": {"backend": "command", "command": str(wrapper), "env": {}},
                    "phases": ["implementation"],
                    "feedbackLoops": ["none"],
                    "parallelBattles": parallel,
                },
            },
        )
        ids = [
            daemon.call(
                "task.create",
                {
                    "repo": str(repo),
                    "title": f"Bench {k}",
                    "description": "d",
                    "acceptanceCriteria": ["c"],
                },
            )["task"]["id"]
            for k in range(battles)
        ]
        done: set[str] = set()
        with daemon.connect(timeout=600) as conn:
            conn.call(
                "events.subscribe",
                {"repo": str(repo), "types": ["battle_complete", "battle_failed"]},
            )
            t0 = time.perf_counter()
            daemon.call("battle.start", {"repo": str(repo), "all": True})

            def over(e: dict[str, Any]) -> bool:
                done.add(e["taskId"])
                return len(done) == battles

            failed = [e for e in events_of(conn, over, 600) if e["type"] == "battle_failed"]
            wall = time.perf_counter() - t0
        records = [
            daemon.call("battle.history", {"repo": str(repo), "taskId": t})["battle"] for t in ids
        ]
        iterations = [i for r in records for i in r["iterations"]]
        own = [
            sum(v for k, v in (i.get("timingsMs") or {}).items() if k != "agent")
            for i in iterations
        ]
        around = [
            r["durationMs"] - sum(i.get("durationMs") or 0 for i in r["iterations"])
            for r in records
        ]
        table.add(
            f"parallel battles: {battles} in worktrees, {parallel} at once",
            f"{battles / wall * 60:.0f} /min",
            f"{wall:.1f} s wall, {len(failed)} failed",
        )
        table.add(
            "  overhead of our own per iteration (median)",
            f"{statistics.median(own):.1f} ms",
            f"{len(iterations)} iterations",
        )
        table.add(
            "  battle time around its iterations (median)",
            f"{statistics.median(around):.1f} ms",
            "status writes, merge back, worktree removal",
        )
        merged = len(
            [line for line in _git(repo, "log", "--format=%s").splitlines() if "Bench" in line]
        )
        table.add("  battles merged into main", f"{merged}", f"of {battles}")
    finally:
        daemon.stop()


def _git(repo: Any, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


if __name__ == "__main__":
    table = Table()
    run(table)
