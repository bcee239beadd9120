"""Event fan-out: deliveries per second to 1, 10 and 100 subscribers, the latency from
publish to receipt, and what a stalled subscriber costs the others.

Subscribers live in a few worker processes (each multiplexing its sockets with
selectors and only counting lines), so the figure measures the daemon, not a Python
client's GIL.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import selectors
import socket
import time
from multiprocessing.synchronize import Barrier
from typing import Any

from tests.bench.common import Table, median, pct, start_daemon

SUB = b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{"types":["debug"]}}\n'
WORKERS = 4


def worker(path: str, n_socks: int, count: int, ready: Barrier, out: mp.Queue[Any]) -> None:
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n_socks):
        s = socket.socket(socket.AF_UNIX)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.connect(path)
        s.sendall(SUB)
        buf = b""
        while b"\n" not in buf:
            buf += s.recv(65536)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ, [buf.split(b"\n", 1)[1], 0])
    ready.wait()
    remaining = n_socks
    lat: list[float] = []
    while remaining:
        for key, _ in sel.select():
            state = key.data
            chunk = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
            state[1] += chunk.count(b"\n")
            if len(lat) < 50 and b"\n" in chunk:
                line = chunk.split(b"\n", 1)[0]
                try:
                    lat.append(time.time() - json.loads(line)["params"]["payload"]["t"])
                except (ValueError, KeyError):
                    pass
            if state[1] >= count:
                sel.unregister(key.fileobj)
                remaining -= 1
    out.put((time.perf_counter(), lat))
    for s in socks:
        s.close()


def run_round(path: str, subs: int, count: int, size: int = 0) -> tuple[float, list[float]]:
    ctx = mp.get_context("fork")
    per = [subs // WORKERS + (1 if i < subs % WORKERS else 0) for i in range(WORKERS)]
    per = [p for p in per if p]
    ready = ctx.Barrier(len(per) + 1)
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=worker, args=(path, p, count, ready, out)) for p in per]
    for p in procs:
        p.start()
    ready.wait()
    t0 = time.perf_counter()
    from pokeralphctl.client import Connection

    with Connection(path) as conn:
        conn.call("debug.emit", {"count": count, "size": size})
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    elapsed = max(r[0] for r in results) - t0
    return subs * count / elapsed, [x for r in results for x in r[1]]


def run(table: Table, rounds: int = 3) -> None:
    daemon = start_daemon("--debug-methods", "--max-subscriber-backlog", str(128 << 20))
    try:
        path = str(daemon.socket)
        for subs, count in ((1, 200_000), (10, 100_000), (100, 20_000)):
            rates, lat = [], []
            for _ in range(rounds):  # this machine's load changes: a median, and the range
                rate, latencies = run_round(path, subs, count)
                rates.append(rate)
                lat += latencies
            spread = f"median of {rounds}, {min(rates):,.0f} to {max(rates):,.0f}"
            target = "; target ≥1,000,000/s at 100" if subs == 100 else ""
            table.add(
                f"fan-out to {subs} subscriber(s): deliveries/s",
                f"{median(rates):,.0f}/s",
                spread + target,
            )
            table.add(
                f"fan-out to {subs}: burst publish→receipt p50",
                f"{pct(lat, 50) * 1000:.1f} ms",
                f"{count:,} events published at once",
            )
        stalled = socket.socket(socket.AF_UNIX)
        stalled.connect(path)
        stalled.sendall(SUB)
        rate, _ = run_round(path, 10, 20_000, 200)
        table.add("fan-out to 10 with 1 stalled subscriber: deliveries/s", f"{rate:,.0f}/s")
        stalled.close()
    finally:
        daemon.stop()
