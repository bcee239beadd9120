"""The sandbox's cost: a run started through bubblewrap against the same run bare, and
the egress proxy's added latency per request (target: under 30 ms per run).

``python -m tests.bench.bench_sandbox`` (or ``python -m tests.bench.run sandbox``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from pokeralph_core.config.sandbox import SandboxConfig, parse_host_pattern
from pokeralphd.proc import AgentScope, ProcessOwner, spawn
from pokeralphd.sandbox import (
    EgressProxy,
    SandboxPolicy,
    build_policy,
    bwrap_argv,
    needs_for,
    probe,
)
from pokeralphd.sandbox.service import SandboxService
from tests.bench.common import Table, ms, pct, timed, us
from tests.helpers import make_git_repo, short_tmpdir


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _get(connect: Callable[[], socket.socket], head: bytes) -> None:
    with connect() as sock:
        sock.sendall(head)
        while sock.recv(65536):
            pass


def run(table: Table, runs: int = 40, requests: int = 300) -> None:
    found = probe()
    if not found.ok:
        table.add("sandbox", "skipped", found.reason)
        return
    home = short_tmpdir("prbs") / "home"
    tree = make_git_repo(home / "repo")
    env_home = {"HOME": str(home), "PATH": "/usr/bin:/bin"}

    def policy(network: str, proxy: str | None = None) -> SandboxPolicy:
        return build_policy(
            tree,
            config=SandboxConfig.model_validate({"network": {"mode": network}}),
            needs=needs_for("command", {}, home),
            home=home,
            proxy_socket=proxy,
        )

    def start(argv: list[str]) -> None:
        subprocess.run(argv, env=env_home, check=True, stdout=subprocess.DEVNULL)

    bare = timed(lambda: start(["/bin/true"]), runs)
    none = bwrap_argv(policy("none"), ["/bin/true"])
    boxed = timed(lambda: start(none), runs)
    placeholder = short_tmpdir("prbs") / "proxy.sock"  # the bridge only needs it there
    placeholder.touch()
    bridged_argv = bwrap_argv(policy("allowlist", str(placeholder)), ["/bin/true"])
    bridged = timed(lambda: start(bridged_argv), runs)
    cost = pct(boxed, 50) - pct(bare, 50)
    table.add("run /bin/true bare, p50", ms(pct(bare, 50)))
    table.add(
        "run /bin/true in bwrap (network none), p50",
        ms(pct(boxed, 50)),
        f"+{ms(cost)} per run (target < 30 ms)",
    )
    table.add(
        "run /bin/true in bwrap + proxy bridge (allowlist), p50",
        ms(pct(bridged, 50)),
        f"+{ms(pct(bridged, 50) - pct(bare, 50))} (the bridge is a Python start)",
    )

    _daemon_runs(table, tree, home, runs)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sock_path = str(short_tmpdir("prbp") / "p.sock")
    ready = threading.Event()
    stop: list[anyio.CancelScope] = []
    tokens: list[anyio.lowlevel.EventLoopToken] = []

    async def serve() -> None:
        proxy = EgressProxy([parse_host_pattern(f"127.0.0.1:{port}")])
        with anyio.CancelScope() as scope:
            stop.append(scope)
            tokens.append(anyio.lowlevel.current_token())
            async with anyio.create_task_group() as tg:
                await tg.start(proxy.serve, sock_path)
                ready.set()

    thread = threading.Thread(target=anyio.run, args=(serve,), daemon=True)
    thread.start()
    ready.wait(10)
    direct_head = b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"
    proxied_head = f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()

    def unix() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(sock_path)
        return sock

    direct = timed(
        lambda: _get(lambda: socket.create_connection(("127.0.0.1", port)), direct_head), requests
    )
    proxied = timed(lambda: _get(unix, proxied_head), requests)
    table.add("HTTP request direct, p50", us(pct(direct, 50)))
    table.add(
        "HTTP request through the proxy, p50",
        us(pct(proxied, 50)),
        f"+{us(pct(proxied, 50) - pct(direct, 50))} per request (one connection each)",
    )
    anyio.from_thread.run_sync(stop[0].cancel, token=tokens[0])
    thread.join(5)
    server.shutdown()
    server.server_close()


def _daemon_runs(table: Table, tree: Path, home: Path, runs: int) -> None:
    """A run as the daemon starts and ends one (``proc.spawn``, a token, the end of its
    leftovers): bare (the death watch's while it runs, swept by token), and with the whole
    per-run sandbox of an iteration (its policy, its own socket served, its proxy under
    allowlist, bwrap and the bridge; no death watch or sweep: bwrap's pid namespace ends
    with it), opened and
    closed each time."""
    sockets = short_tmpdir("prbr")
    owner = ProcessOwner.anonymous()
    scope = AgentScope("battle", "bench", "001-bench")

    async def serve_socket(path: str, _scope: AgentScope, *, task_status: Any) -> None:
        listener = await anyio.create_unix_listener(path)
        async with listener:
            task_status.started()
            await anyio.sleep_forever()

    service = SandboxService(runtime_dir=sockets, serve_socket=serve_socket)

    async def once(network: str | None) -> float:
        began = time.perf_counter()
        if network is None:
            process = await spawn(["/bin/true"], cwd=str(tree), env={}, owner=owner)
            await process.wait()
            await process.aclose()
            return time.perf_counter() - began
        config = SandboxConfig.model_validate({"network": {"mode": network}})
        async with service.run(config, tree=tree, scope=scope, env={"HOME": str(home)}) as box:
            process = await spawn(["/bin/true"], cwd=str(tree), env={}, owner=owner, confine=box)
            await process.wait()
            await process.aclose()
        return time.perf_counter() - began

    async def measure() -> dict[str | None, list[float]]:
        return {n: [await once(n) for _ in range(runs)] for n in (None, "none", "allowlist")}

    found = anyio.run(measure)
    bare = pct(found[None], 50)
    table.add("an iteration's run started by the daemon, bare, p50", ms(bare))
    for network in ("none", "allowlist"):
        took = pct(found[network], 50)
        table.add(
            f"the same run in its sandbox (network {network}), p50",
            ms(took),
            f"+{ms(took - bare)} per run: policy, run socket, proxy, bwrap",
        )


if __name__ == "__main__":
    run(Table())
    sys.exit(0)
