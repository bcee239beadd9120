"""``pokeralphctl status`` whole-process wall time against ``python3 -c pass`` and a bare
standard-library client (socket + json, one call) on the same interpreter.

Measured twice: in this checkout's venv (an editable install, whose ``__editable__``
finder imports pathlib and typing at every interpreter start, for every process alike)
and in a temporary venv with a regular ``pip install`` of the checkout, which is what a
user runs. The target (≤1.25x the bare client) applies to the regular install; the
editable figure is kept to compare with earlier runs.

The three commands run in turns (python, bare, pokeralphctl, python, ...), so a change of
the machine's load during the run weighs on each alike.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

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

REPO_ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "tests")


def regular_install(where: Path) -> Path | None:
    """A venv under ``where`` with ``pip install --no-deps`` of a copy of the checkout (the
    copy keeps setuptools' build folder out of it); its bin folder, or None if it fails."""
    src = where / "src"
    shutil.copytree(REPO_ROOT, src, ignore=SKIP)
    venv = where / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(src)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except subprocess.CalledProcessError as exc:
        print(f"  (no regular install: {exc}; {exc.stderr!r:.300})", flush=True)
        return None
    return venv / "bin"


def measure(
    table: Table, label: str, python: str, script: str, env: dict[str, str], runs: int
) -> None:
    def proc(*argv: str) -> None:
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)

    commands = {
        "base": (python, "-c", "pass"),
        "bare": (python, "-c", BARE_CLIENT),
        "ctl": (script, "status"),
    }
    for argv in commands.values():  # warm the page cache and write the bytecode
        for _ in range(3):
            proc(*argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name] += timed(partial(proc, *argv), 1)
    base, bare, ctl = (median(times[name]) for name in commands)
    table.add(f"python3 -c pass, {label} (median)", ms(base))
    table.add(
        f"bare stdlib client, daemon.status, {label} (median)",
        ms(bare),
        f"{bare / base:.2f}x python",
    )
    target = " (target ≤1.25x)" if label == "regular install" else ""
    table.add(
        f"pokeralphctl status, {label} (median)",
        ms(ctl),
        f"{ctl / base:.2f}x python, {ctl / bare:.2f}x bare client{target}",
    )


def run(table: Table, runs: int = 40) -> None:
    daemon = start_daemon()
    tmp = Path(tempfile.mkdtemp(prefix="prbcli"))
    try:
        env = dict(daemon.env)
        # As on a user's machine: bytecode is cached (this workplace sets the variable,
        # which makes every start recompile the client's sources and hides nothing else).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        bindir = regular_install(tmp)
        if bindir is not None:
            python = str(bindir / "python")
            measure(table, "regular install", python, str(bindir / "pokeralphctl"), env, runs)
        script = os.path.join(os.path.dirname(sys.executable), "pokeralphctl")
        measure(table, "editable install", sys.executable, script, env, runs)
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)
