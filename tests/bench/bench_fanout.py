"""Event fan-out: deliveries per second to 1, 10 and 100 subscribers, the latency from
publish to receipt, and what a stalled subscriber costs the others."""

from __future__ import annotations

import json
import socket
import threading
import time

from tests.bench.common import Table, pct, start_daemon

SUB = b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{"types":["debug"]}}\n'


def subscriber(
    path: str, count: int, ready: threading.Barrier, lat: list[float], done: list[float]
) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.connect(path)
    sock.sendall(SUB)
    buf = b""
    while b"\n" not in buf:
        buf += sock.recv(65536)
    buf = buf.split(b"\n", 1)[1]
    ready.wait()
    seen = 0
    sample_every = max(1, count // 200)
    while seen < count:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if seen % sample_every == 0:
                lat.append(time.time() - json.loads(line)["params"]["payload"]["t"])
            seen += 1
    done.append(time.perf_counter())
    sock.close()


def run(table: Table) -> None:
    daemon = start_daemon("--debug-methods", "--max-subscriber-backlog", str(64 << 20))
    try:
        for subs, count in ((1, 100_000), (10, 50_000), (100, 10_000)):
            ready = threading.Barrier(subs + 1)
            lat: list[float] = []
            done: list[float] = []
            threads = [
                threading.Thread(
                    target=subscriber, args=(str(daemon.socket), count, ready, lat, done)
                )
                for _ in range(subs)
            ]
            for t in threads:
                t.start()
            ready.wait()
            t0 = time.perf_counter()
            daemon.call("debug.emit", {"count": count})
            for t in threads:
                t.join(120)
            elapsed = max(done) - t0 if done else float("inf")
            table.add(
                f"fan-out to {subs} subscriber(s): deliveries/s",
                f"{subs * count / elapsed:,.0f}/s",
                "target ≥1,000,000/s at 100" if subs == 100 else "",
            )
            table.add(
                f"fan-out to {subs}: publish→receipt p50 / p99",
                f"{pct(lat, 50) * 1000:.1f} / {pct(lat, 99) * 1000:.1f} ms",
            )
        # A stalled subscriber: connected, subscribed, never reads.
        stalled = socket.socket(socket.AF_UNIX)
        stalled.connect(str(daemon.socket))
        stalled.sendall(SUB)
        ready = threading.Barrier(11)
        lat, done = [], []
        threads = [
            threading.Thread(target=subscriber, args=(str(daemon.socket), 10_000, ready, lat, done))
            for _ in range(10)
        ]
        for t in threads:
            t.start()
        ready.wait()
        t0 = time.perf_counter()
        daemon.call("debug.emit", {"count": 10_000, "size": 200})
        for t in threads:
            t.join(120)
        table.add(
            "fan-out to 10 with 1 stalled subscriber: deliveries/s",
            f"{10 * 10_000 / (max(done) - t0):,.0f}/s",
        )
        stalled.close()
    finally:
        daemon.stop()
