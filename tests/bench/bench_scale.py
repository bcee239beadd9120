"""Scale: daemon start time, resident memory and idle CPU with 1, 100 and 1,000 registered
repositories (no polling of idle repositories: idle CPU should be indistinguishable from 0)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import psutil

from pokeralph_core.weblink import info_path
from tests.bench.common import Table
from tests.helpers import DaemonProcess, short_tmpdir, wait_until


def make_repos(home, count: int) -> None:  # type: ignore[no-untyped-def]
    repos = []
    for i in range(count):
        path = home / "repos" / f"r{i:04d}"
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        repos.append(
            {"name": f"r{i:04d}", "path": str(path), "registeredAt": "2026-11-23T00:00:00.000Z"}
        )
    state = home / "state" / "pokeralph"
    state.mkdir(parents=True)
    (state / "registry.json").write_text(
        json.dumps({"schemaVersion": 1, "version": 1, "repos": repos})
    )


def run(table: Table, idle_seconds: float = 5.0) -> None:
    for count in (1, 100, 1000):
        home = short_tmpdir("prs")
        make_repos(home, count)
        # The registry was written by hand: a first start creates each .pokeralph/ (as
        # repo.register would have); the start measured is a restart, as in real life.
        DaemonProcess(home, web=True, fork=False).start().stop()
        daemon = DaemonProcess(home, web=True, fork=False)  # as a user runs it: with the dashboard
        t0 = time.perf_counter()
        daemon.start()
        started = time.perf_counter() - t0
        try:
            assert len(daemon.call("repo.list")) == count
            # The socket answers while the dashboard still loads (in a worker thread):
            # idleness is measured once that is done too.
            info = info_path(str(daemon.socket))
            wait_until(lambda: os.path.exists(info), 20, "the dashboard")  # noqa: B023
            proc = psutil.Process(daemon.proc.pid)  # type: ignore[union-attr]
            rss = proc.memory_info().rss
            cpu0 = sum(proc.cpu_times()[:2])
            time.sleep(idle_seconds)  # measuring idleness: the daemon is left alone on purpose
            cpu = sum(proc.cpu_times()[:2]) - cpu0
            table.add(
                f"{count} repositories: start until ping answers",
                f"{started * 1000:.0f} ms",
                "target <2 s at 1,000",
            )
            table.add(f"{count} repositories: resident memory", f"{rss / 2**20:.1f} MiB")
            table.add(
                f"{count} repositories: idle CPU over {idle_seconds:.0f} s",
                f"{cpu * 1000:.1f} ms",
                f"{cpu / idle_seconds * 100:.3f}%",
            )
        finally:
            daemon.stop()
