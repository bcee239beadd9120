"""Issue 24's two Codex bugs, proven through a real daemon with the real Codex CLI against
the scripted Responses API on 127.0.0.1:

- a user's own ``--sandbox`` in ``agent.extraArgs`` replaces our default (both on the
  command line was Codex's exit 2, "cannot be used multiple times", on every start): the
  battle runs and completes;
- a flag Codex does not know fails the same way before any work: the battle fails after
  at most two attempts (not its ten iterations), with Codex's own words in the error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.responses_api import Call as CodexCall
from tests.fakes.responses_api import ResponsesAPI, Say
from tests.helpers import make_git_repo
from tests.inproc import InProcDaemon, running_daemon, setup_task
from tests.real.test_real_codex import DEFAULT_CODEX, codex_env

pytestmark = pytest.mark.anyio
END = {"battle_complete", "battle_failed", "battle_paused", "battle_blocked"}
SIGIL = "All done.\n\n<promise>COMPLETE</promise>"


@pytest.fixture
def codex_bin() -> Path:
    path = Path(os.environ.get("POKERALPH_REAL_CODEX") or DEFAULT_CODEX)
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.skip(f"real Codex CLI not installed at {path} (run tests/real/install.sh)")
    return path


async def _run(d: InProcDaemon, repo: Path, task: str) -> tuple[str, dict[str, Any]]:
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        events = await watcher.events_until(END, timeout=90)
    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    return str(events[-1]["type"]), history["battle"]


async def test_a_users_own_sandbox_flag_replaces_ours_and_the_battle_runs(
    codex_bin: Path, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    write = CodexCall("exec_command", {"cmd": "printf hi > codex.txt"}, text="Writing.")
    with ResponsesAPI([write, Say(SIGIL)]) as api:
        agent = {
            "backend": "codex",
            "command": str(codex_bin),
            "env": codex_env(api, home),
            "extraArgs": ["--sandbox", "danger-full-access"],
        }
        async with running_daemon(home) as d:
            task = await setup_task(d, repo, agent, autoCommit=False, phases=["implementation"])
            ended, battle = await _run(d, repo, task)
    assert ended == "battle_complete", battle
    assert (repo / "codex.txt").read_text() == "hi"


async def test_a_bad_flag_fails_the_battle_at_the_second_attempt_with_codexs_words(
    codex_bin: Path, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    with ResponsesAPI([Say(SIGIL)] * 10) as api:
        agent = {
            "backend": "codex",
            "command": str(codex_bin),
            "env": codex_env(api, home),
            "extraArgs": ["--no-such-flag"],
        }
        async with running_daemon(home) as d:
            task = await setup_task(
                d, repo, agent, maxIterationsPerTask=10, phases=["implementation"]
            )
            ended, battle = await _run(d, repo, task)
        asked = len(api.response_requests())
    assert ended == "battle_failed", battle
    assert len(battle["iterations"]) <= 2
    assert "failed the same way twice" in battle["error"]
    assert "--no-such-flag" in battle["error"]  # Codex's own error, quoted
    assert asked == 0  # no model was ever asked
