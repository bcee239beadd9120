"""Attacks on the wire against a real daemon (default limits), each while another client
pings sequentially on its own connection: the ping p50/p99 per attack, against the
target of p99 ≤ 50 ms (one client must not slow the others)."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pokeralphctl.client import RequestFailed
from tests.bench.common import Table, pct, start_daemon
from tests.helpers import DaemonProcess, blocking_question, raw_request

TARGET_P99 = 0.050
PING = raw_request("daemon.ping")


def ping_loop(path: str, stop: Any, ready: Any, out: Any) -> None:
    """In its own process (a thread would share the GIL with the attacks): sequential
    pings on one connection until ``stop``; the latencies go back through ``out``."""
    latencies: list[float] = []
    error = ""
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            while not stop.is_set():
                t0 = time.perf_counter()
                sock.sendall(PING)
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise ConnectionError(f"closed by the daemon: {buf!r}")
                    buf += chunk
                latencies.append(time.perf_counter() - t0)
                if len(latencies) == 1:
                    ready.set()
    except Exception as exc:
        error = repr(exc)
    finally:
        ready.set()
        out.send((latencies, error))


@contextmanager
def pinger(daemon: DaemonProcess) -> Iterator[list[float]]:
    """Another client pinging sequentially while the block runs; its latencies after."""
    ctx = mp.get_context("fork")
    stop, ready = ctx.Event(), ctx.Event()
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=ping_loop, args=(str(daemon.socket), stop, ready, sender))
    proc.start()
    ready.wait(30)
    latencies: list[float] = []
    try:
        yield latencies
    finally:
        stop.set()
        if receiver.poll(60):
            got, error = receiver.recv()
            latencies.extend(got)
            if error:
                print(f"  (the pinger stopped: {error})", flush=True)
        proc.join(30)


def exchange(daemon: DaemonProcess, payload: bytes, read: bool = True) -> int:
    """Send ``payload`` (from a thread), half-close, read until the daemon closes."""
    total = 0
    with daemon.raw() as sock:
        sock.settimeout(120)

        def send() -> None:
            try:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        sender = threading.Thread(target=send)
        sender.start()
        while read:
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            total += len(chunk)
        sender.join(120)
    return total


def repeat(seconds: float, attack: Callable[[], object]) -> int:
    """Run ``attack`` again and again for about ``seconds``; how many times it ran."""
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        attack()
        runs += 1
    return runs


# --------------------------------------------------------------------- attacks


def invalid_utf8(daemon: DaemonProcess) -> str:
    runs = repeat(2, lambda: exchange(daemon, b'"\x80"\n' + b'{"id":"\xff"}\n' * 100))
    return f"{runs} connections x 101 lines of invalid UTF-8"


def deep_nesting(daemon: DaemonProcess) -> str:
    line = b"[" * 300_000 + b"]" * 300_000 + b"\n"
    frame = b'{"a":' * 200_000
    lsp = b"Content-Length: %d\r\n\r\n" % len(frame) + frame
    runs = repeat(2, lambda: (exchange(daemon, line * 3), exchange(daemon, lsp)))
    return f"{runs} x (3 lines 600 KB deep, 1 LSP frame 1 MB deep)"


def descriptor_flood(daemon: DaemonProcess) -> str:
    socks = []
    refused = 0
    try:
        for _ in range(1500):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(30)
            while True:
                try:
                    sock.connect(str(daemon.socket))
                    break
                except BlockingIOError:
                    time.sleep(0.001)  # backlog full: the daemon catches up
            try:
                sock.sendall(PING)
            except OSError:
                pass
            socks.append(sock)
        for sock in socks:
            try:
                if b"-32023" in sock.recv(4096):
                    refused += 1
            except OSError:
                pass
    finally:
        for sock in socks:
            sock.close()
    # The daemon notices the 1,500 closes before the next attack (and its pinger) starts.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if daemon.call("daemon.status")["clients"] <= 2:
                break
        except RequestFailed:
            pass  # still at the cap: refused, as it should be
        time.sleep(0.01)
    return f"1,500 connections held ({refused} refused past the cap)"


def discover_batches(daemon: DaemonProcess) -> str:
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(300)]
    ).encode()
    got = [0]
    runs = repeat(3, lambda: got.__setitem__(0, got[0] + exchange(daemon, batch + b"\n")))
    return f"{runs} batches of 300 rpc.discover ({len(batch) // 1000} KB; {got[0] >> 20} MiB out)"


def pipelined_flood(daemon: DaemonProcess) -> str:
    count = 300_000
    exchange(daemon, raw_request("daemon.status") * count)
    return f"{count:,} daemon.status pipelined on one connection"


def tiny_batch(daemon: DaemonProcess) -> str:
    tiny = b"[" + b"1," * 524_286 + b"1]\n"
    runs = repeat(3, lambda: exchange(daemon, tiny))
    return f"{runs} batches of 524,287 items in 1 MiB"


def tiny_lines(daemon: DaemonProcess) -> str:
    payload = b"1\n" * (1 << 20) + b"\n" * (2 << 20)
    exchange(daemon, payload)
    return "1 Mi lines of 2 bytes (each an Invalid Request), then 2 MiB of blank lines"


def undecided_framing(daemon: DaemonProcess) -> str:
    payload = b"\r\n" * 8 + b"x" * (8 << 20)
    runs = repeat(2, lambda: exchange(daemon, payload))
    return f"{runs} x 16 bytes CR/LF then 8 MiB without a newline"


def slow_reader(daemon: DaemonProcess) -> str:
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(250)]
    ).encode()
    with daemon.raw() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
        sock.sendall(batch + b"\n")
        got = 0
        t0 = time.monotonic()
        while True:
            chunk = sock.recv(64 << 10)
            got += len(chunk)
            if not chunk or chunk.endswith(b"\n"):
                break
            time.sleep(0.005)
    return f"a {got >> 20} MiB reply drained slowly ({time.monotonic() - t0:.1f} s)"


def stalled_subscriber(daemon: DaemonProcess) -> str:
    stalled = daemon.raw()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(raw_request("events.subscribe", 1, {}))
    try:
        # debug.emit publishes its events in one go: 200 at a time keeps its own cost
        # out of the figure, which is about what the stalled subscriber costs others.
        with daemon.connect() as conn:
            for _ in range(100):
                conn.call("debug.emit", {"count": 200, "size": 1000})
    finally:
        stalled.close()
    return "a subscriber that never reads, 20,000 events of 1 KB"


def pending_waits(daemon: DaemonProcess) -> str:
    wait = blocking_question(daemon, "bench-waits", 30)
    payload = b"".join(raw_request("inbox.wait", i, wait) for i in range(20_000))
    with daemon.raw() as sock:
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        buf = b""
        while buf.count(b"-32022") < 20_000 - 64:
            buf += sock.recv(1 << 20)
        sender.join(60)
    return "20,000 inbox.wait on one connection (64 held, the rest refused)"


def fuzz_stream(daemon: DaemonProcess) -> str:
    rng = random.Random(3)
    valid = raw_request("daemon.ping", 1)

    def frame() -> bytes:
        kind = rng.random()
        if kind < 0.3:
            return rng.randbytes(rng.randint(1, 200)).replace(b"\n", b"") + b"\n"
        cut = bytearray(valid)
        for _ in range(3):
            cut[rng.randrange(len(cut) - 1)] = rng.randrange(256)
        return bytes(cut).replace(b"\n", b"") + b"\n"

    frames = [frame() for _ in range(20_000)]
    exchange(daemon, b"".join(frames))
    return "20,000 random and mutated lines"


ATTACKS: list[tuple[str, Callable[[DaemonProcess], str]]] = [
    ("invalid UTF-8", invalid_utf8),
    ("deep nesting (both framings)", deep_nesting),
    ("fuzzed lines", fuzz_stream),
    ("descriptor flood", descriptor_flood),
    ("batches of rpc.discover", discover_batches),
    ("pipelined flood", pipelined_flood),
    ("batch of 524,287 tiny items", tiny_batch),
    ("pipelined tiny lines", tiny_lines),
    ("CR/LF then endless bytes", undecided_framing),
    ("slow reader of a big reply", slow_reader),
    ("stalled subscriber + event flood", stalled_subscriber),
    ("inbox.wait flood", pending_waits),
]


def run(table: Table) -> None:
    daemon = start_daemon("--debug-methods")
    try:
        daemon.call("rpc.discover")  # built once per daemon (off the event loop): not timed
        with pinger(daemon) as quiet:
            time.sleep(1)  # the baseline: a second of pings with nothing else going on
        report(table, "no attack (baseline)", quiet, f"{len(quiet)} pings")
        for name, attack in ATTACKS:
            with pinger(daemon) as latencies:
                what = attack(daemon)
            alive = daemon.proc is not None and daemon.proc.poll() is None
            report(table, name, latencies, what if alive else "THE DAEMON DIED")
            if not alive:
                break
    finally:
        daemon.stop()


def report(table: Table, name: str, latencies: list[float], what: str) -> None:
    if not latencies:
        table.add(f"ping during {name}: p50 / p99", "no pings", f"FAILED; {what}")
        return
    p50, p99 = pct(latencies, 50), pct(latencies, 99)
    verdict = "ok" if p99 <= TARGET_P99 else "OVER"
    table.add(
        f"ping during {name}: p50 / p99",
        f"{p50 * 1000:.2f} / {p99 * 1000:.1f} ms",
        f"{verdict} (target p99 ≤ 50 ms); {len(latencies)} pings; {what}",
    )
