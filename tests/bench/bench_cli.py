"""``pokeralphctl status`` whole-process wall time against ``python3 -c pass`` and a bare
standard-library client (socket + json, one call) on the same interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.bench.common import Table, median, ms, start_daemon, timed

BARE_CLIENT = """
import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["POKERALPH_SOCKET"])
s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\\n')
buf = b""
while not buf.endswith(b"\\n"):
    buf += s.recv(65536)
print(json.loads(buf)["result"]["pid"])
"""


def run(table: Table, runs: int = 40) -> None:
    daemon = start_daemon()
    try:
        env = dict(daemon.env)
        # As on a user's machine: bytecode is cached (this workplace sets the variable,
        # which makes every start recompile the client's sources and hides nothing else).
        env.pop("PYTHONDONTWRITEBYTECODE", None)

        def proc(*argv: str) -> None:
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)

        for _ in range(3):  # warm the page cache
            proc(sys.executable, "-m", "pokeralphctl", "status")
        base = median(timed(lambda: proc(sys.executable, "-c", "pass"), runs))
        bare = median(timed(lambda: proc(sys.executable, "-c", BARE_CLIENT), runs))
        script = os.path.join(os.path.dirname(sys.executable), "pokeralphctl")
        ctl = median(timed(lambda: proc(script, "status"), runs))
        table.add("python3 -c pass (median)", ms(base))
        table.add(
            "bare stdlib client, daemon.status (median)", ms(bare), f"{bare / base:.2f}x python"
        )
        table.add(
            "pokeralphctl status (median)",
            ms(ctl),
            f"{ctl / base:.2f}x python, {ctl / bare:.2f}x bare client (target ≤1.25x)",
        )
    finally:
        daemon.stop()
