"""Writes under contention: acknowledged PRD writes per second and their latency with 50
concurrent writers (one connection each) against a real daemon process; a small
``task.create`` on a large PRD; what a battle's save costs per progress tick.

The writers share one asyncio loop in this process and only frame, send and parse one
line per call, so the figure measures the daemon (and the disk's fsync), not the client.

Two kinds of load. A closed loop (each writer sends its next call when the last one is
answered) measures the most the daemon acknowledges; its latency is fixed by Little's
law at WRITERS / throughput (50 writers at 1,000/s wait 50 ms each, whatever the
daemon does), so p50 < 20 ms there needs 2,500 writes/s. An open loop (each writer at
10 calls/s on a fixed schedule, 500/s in all) measures the latency a write sees at that
load; it counts from the time a call was due, so a daemon falling behind shows.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import psutil

from tests.bench.common import Table, median, pct, start_daemon
from tests.helpers import make_git_repo

WRITERS = 50
SECONDS = 5.0
LARGE_MB = 20


class Writer:
    """One connection, one request at a time (newline-delimited JSON-RPC)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.ids = reader, writer, 0

    @classmethod
    async def open(cls, path: Path) -> Writer:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 26)
        return cls(reader, writer)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self.ids += 1
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        self.writer.write(json.dumps(message).encode() + b"\n")
        while True:
            reply = json.loads(await self.reader.readline())
            if reply.get("id") == self.ids:
                break
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def _task(title: str) -> dict[str, Any]:
    return {"title": title, "description": "d", "acceptanceCriteria": ["c"]}


async def _writers(
    socket: Path, repo: str, method: str, rate: float | None
) -> tuple[int, float, list[float]]:
    """``WRITERS`` connections calling ``method`` for ``SECONDS``: back to back (``rate``
    None: a closed loop, whose latency is bound to be WRITERS / throughput), or each at
    ``rate`` calls per second on a fixed schedule (an open loop: latency counts from the
    time a call was due, so falling behind shows)."""
    conns = [await Writer.open(socket) for _ in range(WRITERS)]
    task_ids = []
    if method == "task.update":
        for i in range(WRITERS):
            created = await conns[0].call("task.create", {"repo": repo, **_task(f"Writer {i}")})
            task_ids.append(created["task"]["id"])
    # a PRD holds at most 999 task ids: creates stop short of that
    limit = 10**9 if method == "task.update" else 900 // WRITERS
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + SECONDS

    async def loop(index: int) -> None:
        conn, n = conns[index], 0
        due = start + (index / WRITERS / rate if rate else 0)  # spread over one period
        while due < deadline and n < limit:
            n += 1
            if method == "task.update":
                params = {"repo": repo, "taskId": task_ids[index], "description": f"d{n}"}
            else:
                params = {"repo": repo, **_task(f"w{index} n{n}")}
            if rate:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))  # pacing the load
            else:
                due = time.perf_counter()
            await conn.call(method, params)
            latencies.append(time.perf_counter() - due)
            due = due + 1 / rate if rate else time.perf_counter()

    await asyncio.gather(*(loop(i) for i in range(WRITERS)))
    elapsed = time.perf_counter() - start
    for conn in conns:
        await conn.close()
    return len(latencies), elapsed, latencies


def _large_prd(path: Path, megabytes: int) -> int:
    """A hand-made PRD of about ``megabytes`` MB: 800 tasks with long descriptions (a PRD
    holds at most 999 task ids)."""
    count = 800
    body = "x" * (megabytes * 1_000_000 // count)
    tasks = [
        {
            "id": f"{i + 1:03d}-big",
            "title": f"Big {i}",
            "description": body,
            "acceptanceCriteria": ["c"],
            "priority": i + 1,
        }
        for i in range(count)
    ]
    doc = {"schemaVersion": 1, "version": 1, "name": "Large", "description": "d", "tasks": tasks}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return count


def _progress_tick(table: Table, iterations: int = 100, ticks: int = 50) -> None:
    """In process: what ``BattleOrchestrator.save`` costs per progress tick once the
    battle has ``iterations`` iterations (history.json unchanged between ticks)."""
    import tempfile
    from typing import cast

    import anyio

    from pokeralph_core.timeutil import utcnow
    from pokeralphd.battle.orchestrator import BattleOrchestrator
    from pokeralphd.battle.state import ActiveBattle, BattleHost
    from pokeralphd.domain.models import Battle, Iteration, Progress
    from pokeralphd.domain.registry import RepoEntry
    from pokeralphd.domain.statuses import BattleStatus, IterationResult
    from pokeralphd.ports import Inbox
    from pokeralphd.store.repo_store import RepoStore

    class Sink:
        def publish(self, *args: object) -> None:
            pass

    root = Path(tempfile.mkdtemp(prefix="prw", dir="/tmp"))
    store = RepoStore(RepoEntry(name="r", path=str(root)), Sink(), root / "user.json")
    store.open()
    orch = BattleOrchestrator(store, cast(BattleHost, None), cast(Inbox, None))
    now = utcnow()
    battle = Battle(
        task_id="001-a",
        status=BattleStatus.RUNNING,
        started_at=now,
        iterations=[
            Iteration(
                number=n + 1,
                started_at=now,
                ended_at=now,
                result=IterationResult.SUCCESS,
                output="o" * 2000,
                files_changed=[f"src/f{k}.py" for k in range(10)],
            )
            for n in range(iterations)
        ],
    )
    store.files.create_battle_folder("001-a")

    async def main() -> list[float]:
        active = ActiveBattle(battle, Progress(task_id="001-a"), "A")
        await orch.save(active)
        out = []
        for n in range(ticks):
            active.progress.last_output = f"line {n}"
            t0 = time.perf_counter()
            await orch.save(active)
            out.append(time.perf_counter() - t0)
        return out

    times = anyio.run(main)
    store.close()
    path = store.files.history_path("001-a")
    history = json.loads(path.read_text())["version"]
    table.add(
        f"battle save per progress tick ({iterations} iterations)",
        f"{median(times) * 1000:.2f} ms",
        f"p50 of {ticks}; history.json ({path.stat().st_size / 1e6:.1f} MB) "
        f"written {history} times in all",
    )


def run(table: Table) -> None:
    rounds = [
        ("task.update", None, "closed loop"),
        ("task.create", None, "closed loop"),
        ("task.update", 10.0, "10/s each"),
    ]
    for method, rate, how in rounds:
        daemon = start_daemon()
        try:
            repo = make_git_repo(daemon.home / "repo")
            daemon.call("repo.register", {"path": str(repo)})
            proc = psutil.Process(daemon.proc.pid)  # type: ignore[union-attr]
            cpu0 = sum(proc.cpu_times()[:2])
            acked, elapsed, lat = asyncio.run(_writers(daemon.socket, str(repo), method, rate))
            cpu = sum(proc.cpu_times()[:2]) - cpu0
            prd = json.loads((repo / ".pokeralph" / "prd.json").read_text())
            name = f"{WRITERS} writers x {method}, {how}"
            table.add(
                f"{name}: acknowledged writes/s",
                f"{acked / elapsed:.0f} /s",
                f"{acked} in {elapsed:.1f} s; prd.json at version {prd['version']}; "
                f"daemon CPU {cpu / acked * 1000:.2f} ms/write; target ≥500",
            )
            table.add(
                f"{name}: p50 / p99",
                f"{pct(lat, 50) * 1000:.1f} / {pct(lat, 99) * 1000:.1f} ms",
                "target p50 <20 ms",
            )
        finally:
            daemon.stop()

    daemon = start_daemon()
    try:
        repo = make_git_repo(daemon.home / "repo")
        prd_path = repo / ".pokeralph" / "prd.json"
        count = _large_prd(prd_path, LARGE_MB)
        size = prd_path.stat().st_size
        daemon.call("repo.register", {"path": str(repo)})

        async def creates(runs: int) -> list[float]:
            conn = await Writer.open(daemon.socket)
            out = []
            for n in range(runs):
                t0 = time.perf_counter()
                await conn.call("task.create", {"repo": str(repo), **_task(f"Small {n}")})
                out.append(time.perf_counter() - t0)
            await conn.close()
            return out

        times = asyncio.run(creates(11))
        table.add(
            f"task.create on a {size / 1e6:.0f} MB PRD ({count} tasks): first",
            f"{times[0] * 1000:.0f} ms",
            "includes loading the PRD",
        )
        table.add(
            f"task.create on a {size / 1e6:.0f} MB PRD: p50 of the next {len(times) - 1}",
            f"{median(times[1:]) * 1000:.0f} ms",
            "was 870 ms on 58 MB",
        )
    finally:
        daemon.stop()

    _progress_tick(table)
