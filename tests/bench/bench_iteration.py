"""The cost of one iteration, all in (issue 22), against the same agent run bare.

A battle of ITERATIONS iterations with an instant agent (a shell script: it reads its
prompt, changes a file, says it is done only on the last iteration), a trivial feedback
loop (``true``) and a commit each iteration. All in is the battle's wall time from
``battle.start`` to ``battle_complete``, per iteration; the bare agent is the same script
spawned from Python with a prompt on stdin, as bare as it gets. Our own is the difference
(target: at most 15 ms, commit and feedback loop included). The breakdown: the daemon's
own phases from the iteration records (``timingsMs``), what the iteration record leaves
out (between iterations), and the floors of what we run (the agent through ``nice``,
an iteration's git steps by hand: two ``git status`` and a ``git commit``, ``sh -c true``),
and the CPU time per iteration of the daemon and of its children (git, ``nice``, the
agent, the loop's shell): steadier than wall time on a shared machine.

``--profile`` runs the daemon under cProfile and prints its top 25 entries by cumulative
time: the event loop thread's CPU time (``time.thread_time``), which a busy machine does
not inflate as it does wall time (git runs in worker threads: see its phase instead).

``python -m tests.bench.bench_iteration --iterations 10`` for a small run.
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tests.bench.common import Table, start_daemon
from tests.helpers import DaemonProcess, events_of, make_git_repo, short_tmpdir

AGENT = """#!/bin/sh
# an instant agent: reads its prompt, changes a file, is done on the last iteration ($1)
cat > /dev/null
echo "$POKERALPH_ITERATION" > work.txt
if [ "$POKERALPH_ITERATION" = "$1" ]; then echo "done <promise>COMPLETE</promise>"; else echo working; fi
"""
PROMPT = ("A task prompt of about the size the daemon builds. " * 80).encode()

_PROFILED = """
import cProfile, sys
import anyio
from pokeralphd.daemon import Daemon
from pokeralphd.logsetup import setup_logging
from pokeralph_core.userdirs import Paths
from pokeralphd.settings import DaemonSettings
setup_logging("info", None)
settings = {"web": False, "sandbox": sys.argv[2] == "sandbox"}
daemon = Daemon(Paths.resolve(None), DaemonSettings.model_validate(settings), own_process=True)
import time
profile = cProfile.Profile(time.thread_time)
profile.enable()
try:
    anyio.run(daemon.run)
finally:
    profile.disable()
    profile.dump_stats(sys.argv[1])
"""


class ProfiledDaemon(DaemonProcess):
    """A daemon (without the dashboard) under cProfile; its stats in ``stats`` once stopped."""

    def __init__(self, home: Path, sandbox: bool) -> None:
        super().__init__(home, fork=False)
        self.stats = home / "daemon.prof"
        self.sandbox = sandbox

    def start(self, wait: bool = True) -> ProfiledDaemon:
        mode = "sandbox" if self.sandbox else "none"
        self._launch(["-c", _PROFILED, str(self.stats), mode], wait)
        return self


STATUS = ["git", "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"]


def bare_runs(
    argv: list[str], runs: int, cwd: Path, commit: bool = False
) -> tuple[list[float], list[float]]:
    """Run ``argv`` ``runs`` times with the prompt on stdin (and the agent's variables);
    the wall times, and if ``commit`` those of an iteration's git steps by hand around
    each: a ``git status`` before, and after it a ``git status``, a ``git add`` of the
    paths git does not know yet (if any) and a ``git commit -- PATHS``."""
    env = {**os.environ, "POKERALPH_TASK_ID": "bench", "POKERALPH_REPO": "bench"}
    spawned, committed = [], []
    for i in range(1, runs + 1):
        env["POKERALPH_ITERATION"] = str(i)
        t0 = time.perf_counter()
        if commit:
            subprocess.run(STATUS, cwd=cwd, check=True, capture_output=True)
        before = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(argv, input=PROMPT, capture_output=True, cwd=cwd, env=env, check=True)
        spawned.append(time.perf_counter() - t0)
        if commit:
            t0 = time.perf_counter()
            out = subprocess.run(STATUS, cwd=cwd, check=True, capture_output=True).stdout
            entries = [e.decode() for e in out.split(b"\0") if len(e) > 3]
            new = [e[3:] for e in entries if e.startswith("??")]
            if new:
                subprocess.run(["git", "add", "-A", "--", *new], cwd=cwd, check=True)
            paths = [e[3:] for e in entries]
            subprocess.run(
                ["git", "commit", "-q", "-m", f"run {i}", "--", *paths], cwd=cwd, check=True
            )
            committed.append(before + time.perf_counter() - t0)
    return spawned, committed


def run(table: Table, iterations: int = 50, profile: bool = False, sandbox: bool = False) -> None:
    home = short_tmpdir("prit")
    daemon: DaemonProcess = (
        ProfiledDaemon(home, sandbox).start()
        if profile
        else start_daemon(*(["--sandbox"] if sandbox else []))
    )
    try:
        agent = daemon.home / "agent.sh"
        agent.write_text(AGENT)
        agent.chmod(0o755)
        repo = make_git_repo(daemon.home / "repo")
        daemon.call("repo.register", {"path": str(repo)})
        patch = {
            "mode": "yolo",
            "agent": {
                "backend": "command",
                "command": str(agent),
                "extraArgs": [str(iterations)],
                "env": {},
            },
            "phases": ["implementation"],
            "feedbackLoops": ["test"],
            "feedbackCommands": {"test": "true"},
            "autoCommit": True,
        }
        daemon.call("config.update", {"repo": str(repo), "patch": patch})
        task = daemon.call(
            "task.create",
            {"repo": str(repo), "title": "Bench", "description": "d", "acceptanceCriteria": ["c"]},
        )["task"]["id"]
        with daemon.connect(timeout=600) as conn:
            conn.call(
                "events.subscribe",
                {
                    "repo": str(repo),
                    "types": ["iteration_start", "battle_failed", "battle_complete"],
                },
            )
            cpu0 = psutil.Process(daemon.pid).cpu_times()
            t0 = time.perf_counter()
            daemon.call(
                "battle.start", {"repo": str(repo), "taskId": task, "maxIterations": iterations}
            )
            starts: list[float] = []
            ended: dict[str, Any] = {}
            for event in events_of(conn, lambda e: e["type"] != "iteration_start", timeout=600):
                starts.append(time.perf_counter())
                ended = event
            wall = time.perf_counter() - t0
            cpu1 = psutil.Process(daemon.pid).cpu_times()
        battle = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        commits = _git(repo, "rev-list", "--count", "HEAD")
    finally:
        daemon.stop()
    records = battle["iterations"]
    # steady state: from the first iteration's start to the last one's, per iteration
    # (the battle's own start and end are the figure after it)
    per = (starts[-2] - starts[0]) / (len(starts) - 2)

    bare_dir = make_git_repo(home / "bare")
    spawned, committed = bare_runs([str(agent), str(iterations)], iterations, bare_dir, True)
    nice = shutil.which("nice")
    via_nice = (
        bare_runs([nice, "-n", "19", "--", str(agent), str(iterations)], iterations, bare_dir)[0]
        if nice
        else []
    )
    loop = bare_runs(["/bin/sh", "-c", "true"], iterations, bare_dir)[0]
    bare = statistics.mean(spawned)

    table.add(
        "iteration all in: instant agent, `true` loop, a commit (mean)",
        f"{per * 1000:.1f} ms",
        f"{len(records)} iterations, {ended['type']}, {int(commits) - 1} commits; "
        "iteration_start to iteration_start",
    )
    table.add(
        "  the battle's start and end, beyond its iterations",
        f"{(wall - per * len(records)) * 1000:.0f} ms",
        f"battle.start → battle_complete {wall:.2f} s",
    )
    table.add("  the same agent run bare from Python (mean)", f"{bare * 1000:.1f} ms", "")
    table.add(
        "  our own per iteration (all in - bare agent)",
        f"{(per - bare) * 1000:.1f} ms",
        "target ≤15 ms, commit and feedback loop included",
    )
    phases: dict[str, list[float]] = {}
    for r in records:
        for name, value in (r.get("timingsMs") or {}).items():
            phases.setdefault(name, []).append(value)
    for name, values in phases.items():  # means: they add up to the record's duration
        table.add(
            f"    phase {name} (mean)",
            f"{statistics.mean(values):.1f} ms",
            f"median {statistics.median(values):.1f} ms",
        )
    durations = [r["durationMs"] for r in records]
    table.add(
        "    outside the iteration record (all in - its duration, mean)",
        f"{(per - statistics.mean(durations) / 1000) * 1000:.1f} ms",
        "the record's last write, the cost ledger, the next iteration's start",
    )
    n = len(records)
    table.add(
        "  CPU per iteration: the daemon's own / its children's (mean)",
        f"{(cpu1.user + cpu1.system - cpu0.user - cpu0.system) / n * 1000:.1f} / "
        f"{(cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system) / n * 1000:.1f} ms",
        "children: git, nice, the agent, the loop's shell; the bare agent's is in it",
    )
    if via_nice:
        table.add(
            "  floor: the agent through nice -n 19 (mean)",
            f"{statistics.mean(via_nice) * 1000:.1f} ms",
        )
    table.add(
        "  floor: the same git steps by hand (mean)",
        f"{statistics.mean(committed) * 1000:.1f} ms",
    )
    table.add("  floor: sh -c true (mean)", f"{statistics.mean(loop) * 1000:.1f} ms")
    if profile:
        assert isinstance(daemon, ProfiledDaemon)
        print("\nthe daemon under cProfile, top 25 by cumulative CPU time of the loop's thread:")
        pstats.Stats(str(daemon.stats)).sort_stats("cumulative").print_stats(25)
        print("top 25 by own time:")
        pstats.Stats(str(daemon.stats)).sort_stats("tottime").print_stats(25)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="the daemon under cProfile")
    parser.add_argument(
        "--sandbox", action="store_true", help="runs confined (bubblewrap), as by default"
    )
    args = parser.parse_args(argv)
    table = Table()
    run(table, args.iterations, args.profile, args.sandbox)
    print()
    print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
