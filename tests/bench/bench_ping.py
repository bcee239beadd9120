"""``daemon.ping`` round trips on one connection, sequential and pipelined, against a
minimal reference server (asyncio, newline-delimited JSON echo) to show dispatch overhead."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

from tests.bench.common import Table, median, pct, start_daemon, us
from tests.helpers import short_tmpdir

REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n'


def reference_server(path: Path, ready: threading.Event, stop: threading.Event) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            msg = json.loads(line)
            writer.write(
                json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": "pong"}).encode() + b"\n"
            )
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_unix_server(handle, str(path), limit=1 << 20)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        server.close()

    asyncio.run(main())


def sequential(path: Path, n: int) -> list[float]:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(path))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sock.sendall(REQUEST)
        buf = b""
        while not buf.endswith(b"\n"):
            buf += sock.recv(65536)
        out.append(time.perf_counter() - t0)
    sock.close()
    return out


def pipelined(path: Path, n: int) -> float:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(path))
    payload = REQUEST * n

    def send() -> None:
        sock.sendall(payload)

    t0 = time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    seen = 0
    while seen < n:
        chunk = sock.recv(1 << 20)
        seen += chunk.count(b"\n")
    elapsed = time.perf_counter() - t0
    sender.join()
    sock.close()
    return n / elapsed


def run(table: Table, n_seq: int = 5000, n_pipe: int = 200_000, rounds: int = 3) -> None:
    daemon = start_daemon()
    ref_path = short_tmpdir("prr") / "ref.sock"
    ready, stop = threading.Event(), threading.Event()
    ref = threading.Thread(target=reference_server, args=(ref_path, ready, stop), daemon=True)
    ref.start()
    ready.wait(10)
    try:
        ours = sequential(daemon.socket, n_seq)
        theirs = sequential(ref_path, n_seq)
        table.add(
            "ping sequential p50 (pokeralphd)",
            us(pct(ours, 50)),
            f"{pct(ours, 50) / pct(theirs, 50):.2f}x reference (target ≤1.5x)",
        )
        table.add("ping sequential p99 (pokeralphd)", us(pct(ours, 99)))
        table.add("ping sequential p50 (reference asyncio server)", us(pct(theirs, 50)))
        # This machine's load changes from second to second: a median, and the range.
        rates = [pipelined(daemon.socket, n_pipe) for _ in range(rounds)]
        ref_rate = pipelined(ref_path, n_pipe // 4)
        table.add(
            "ping pipelined, one connection (pokeralphd)",
            f"{median(rates):,.0f}/s",
            f"median of {rounds}, {min(rates):,.0f} to {max(rates):,.0f}; target ≥500,000/s",
        )
        table.add("ping pipelined, one connection (reference)", f"{ref_rate:,.0f}/s")
    finally:
        stop.set()
        daemon.stop()
