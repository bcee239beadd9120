"""What a battle's run of the local agent loads: the daemon starts one per iteration, so
its start is paid on every iteration (and by every test that runs one). These modules are
loaded only on the paths that need them, and a battle needs none of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakes.ollama_api import OllamaAPI, Text
from tests.helpers import local_agent_env

# The daemon checks the rules and decides every call in a battle, so the rules' models,
# the config's models and its layers are the standalone command's; psutil only ends a
# command past its timeout; the user's folders are not looked up when --session-dir is
# given, as the daemon does. A model call is one POST with h11 (.transport): httpx, and
# httpcore with its pool, HTTP/2 and (where installed) trio, are fetch_webpage's.
NOT_IN_A_BATTLE = (
    "httpx",
    "httpcore",
    "h2",
    "trio",
    "pokeralph_core.approval",
    "pokeralphd.domain.models",
    "pokeralph_core.config.layers",
    "pokeralph_core.local_defaults",
    "pokeralphd.store.rules",
    "pokeralph_agent.approve",
    "pokeralph_core.proctree",
    "psutil",
    "pokeralph_core.userdirs",
    "platformdirs",
)

# A battle's whole run, then a command that ends by itself, as the toolbox runs it; the
# modules loaded by then go to the file named first.
PROBE = """
import json, sys
import anyio
from pokeralph_agent.cli import main
out = sys.argv.pop(1)
code = main(sys.argv[1:])
from pokeralph_agent.sandbox import Sandbox
from pokeralph_agent.tools import Toolbox
ran = anyio.run(Toolbox(Sandbox(".")).run, "run_in_terminal", {"command": "true"})
with open(out, "w") as f:
    json.dump({"code": code, "ran": ran.success, "modules": sorted(sys.modules)}, f)
"""


def test_a_battle_loads_neither_the_rules_nor_the_config_nor_psutil(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "modules.json"
    env = local_agent_env(tmp_path)
    prompt = {"type": "user", "message": {"role": "user", "content": "go"}}
    battle = ["--stream-json", "--model", "m", "--max-turns", "5", "--timeout", "30"]
    battle += ["-C", str(work), "--permission-prompt-tool", "stdio"]
    battle += ["--session-dir", str(tmp_path / "s")]  # as the daemon runs it
    with OllamaAPI([Text("done")]) as api:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(out), *battle, "--base-url", api.url],
            input=json.dumps(prompt) + "\n",
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert '"subtype": "success"' in done.stdout
    found = json.loads(out.read_text())
    assert found["code"] == 0 and found["ran"]
    assert [name for name in NOT_IN_A_BATTLE if name in found["modules"]] == []
    assert [name for name in found["modules"] if name.startswith("pokeralphd")] == []
    assert "pokeralph_agent.ollama_chat" in found["modules"]  # it did run the model
    assert not (tmp_path / "config").exists()  # nor wrote the user's config
