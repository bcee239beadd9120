"""A user's own flag in ``agent.extraArgs`` replaces the default it overrides, checked
against the real Codex CLI, whose argument parser refuses a repeated ``--sandbox`` ("the
argument '--sandbox <SANDBOX_MODE>' cannot be used multiple times", exit 2): the command
line pokeralph builds is parsed with ``--help`` added, so nothing runs and no model is
asked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.codex import CodexBackend

CODEX = Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / ".bin" / "codex"


def _parses(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(home)}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9"
    return subprocess.run(
        [*argv[:-1], "--help"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    "extra",
    [["--sandbox", "read-only"], ["--sandbox=read-only"], ["-s", "read-only"]],
    ids=["separate", "equals", "short"],
)
def test_a_users_sandbox_flag_is_accepted_by_the_real_codex(extra: list[str], home: Path) -> None:
    if not os.access(CODEX, os.X_OK):
        pytest.skip(f"codex not installed at {CODEX} (run tests/real/install.sh)")
    config = AgentConfig.model_validate(
        {"backend": "codex", "command": str(CODEX), "extraArgs": extra}
    )
    argv = CodexBackend().argv(AgentRequest("PROMPT", home, "execute", config))
    done = _parses(argv, home)
    assert done.returncode == 0, done.stderr
    # What the argv was before (our --sandbox and the user's both): the CLI's own error.
    doubled = _parses([*argv[:3], "--sandbox", "workspace-write", *argv[3:]], home)
    assert doubled.returncode == 2 and "cannot be used multiple times" in doubled.stderr
