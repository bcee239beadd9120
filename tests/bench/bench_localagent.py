"""The local agent's start cost: CPU time (user + system) and wall time of one whole run
of ``python -m pokeralph_agent`` answering one scripted reply, as the daemon runs it
in a battle (``--stream-json``, flags given) and as a person runs it (``--json -p``),
against ``python3 -c pass`` on the same interpreter.

Each run is a fresh process against the scripted Ollama server (real HTTP on 127.0.0.1),
with HOME and the XDG folders in a temporary directory (the standalone run installs its
default rules in the user's config). The commands run in turns, so a change of the
machine's load weighs on each alike; medians are reported.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import Table, median, ms
from tests.fakes.ollama_api import OllamaAPI
from tests.helpers import local_agent_env

RUNS = 15
MODEL = "qwen2.5-coder:7b"


def _cpu_of(argv: list[str], env: dict[str, str], stdin: bytes | None) -> tuple[float, float]:
    """The child's CPU seconds (user + system) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    quiet = subprocess.DEVNULL
    subprocess.run(argv, env=env, input=stdin, stdout=quiet, stderr=quiet, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def run(table: Table, runs: int = RUNS) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="prb-la") as tmp,
        OllamaAPI([], default_text="done") as api,
    ):
        home = Path(tmp)
        work = home / "work"
        work.mkdir()
        env = local_agent_env(home)
        agent = [sys.executable, "-m", "pokeralph_agent"]
        flags = ["--model", MODEL, "--base-url", api.url, "-C", str(work)]
        prompt = {"type": "user", "message": {"role": "user", "content": "go"}}
        commands: dict[str, tuple[list[str], bytes | None]] = {
            "python3 -c pass": ([sys.executable, "-c", "pass"], None),
            "battle (--stream-json)": (
                [
                    *agent,
                    "--stream-json",
                    *flags,
                    "--api",
                    "ollama",
                    "--max-turns",
                    "50",
                    "--context-messages",
                    "100",
                    "--timeout",
                    "120",
                    "--permission-mode",
                    "default",
                    "--permission-prompt-tool",
                    "stdio",
                    "--session-dir",
                    str(home / "sessions"),
                ],
                json.dumps(prompt).encode() + b"\n",
            ),
            "standalone (--json -p)": ([*agent, "--json", *flags, "-p", "go"], None),
        }
        for argv, stdin in commands.values():  # warm the page cache and the bytecode
            _cpu_of(argv, env, stdin)
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        wall: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (argv, stdin) in commands.items():
                c, w = _cpu_of(argv, env, stdin)
                cpu[name].append(c)
                wall[name].append(w)
        for name in commands:
            table.add(f"local agent: {name}, CPU (median)", ms(median(cpu[name])), f"{runs} runs")
            table.add(f"local agent: {name}, wall (median)", ms(median(wall[name])))


if __name__ == "__main__":
    table = Table()
    run(table, int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
