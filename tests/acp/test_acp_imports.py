"""The guard of ``pokeralph-acp``'s imports: the standard library and ``pokeralphctl`` only
(never the daemon's package, msgspec, pydantic, anyio or asyncio), like the CLI's common
paths (tests/cli/test_imports.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli.test_imports import forbidden
from tests.helpers import DaemonProcess

# Serves the lines of argv[2] as the editor's stdin, then writes the modules imported by
# then to argv[1]; also imports every module of the package.
PROBE = """
import io, json, pkgutil, importlib, sys
import pokeralph_acp
from pokeralph_acp import cli
for m in pkgutil.iter_modules(pokeralph_acp.__path__):
    if m.name != "__main__":
        importlib.import_module("pokeralph_acp." + m.name)
sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[2].encode()))
code = cli.main([])
with open(sys.argv[1], "w") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""


def test_a_session_imports_only_the_standard_library_and_the_client(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(repo)}},
    ]
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), "".join(json.dumps(m) + "\n" for m in lines)],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2] and "sessionId" in replies[1]["result"]
    probe = json.loads(out.read_text())
    assert probe["code"] == 0
    assert "pokeralph_acp.agent" in probe["modules"]
    assert forbidden(probe["modules"]) == []
    assert daemon.call("repo.status", {"repo": str(repo)})["path"] == str(repo)  # registered
