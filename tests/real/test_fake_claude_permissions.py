"""tests/fakes/fake_claude's ``permission_bash`` mode speaks the control protocol as the
real CLI does (tests/fakes/CLAUDE-PERMISSIONS.md); these run without the real CLI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fakes.messages_api import MessagesAPI
from tests.real.conftest import allow, deny, drive

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_claude"

# The keys the real CLI 2.1.330 put in a can_use_tool request for a Bash command.
REAL_KEYS = {
    "subtype",
    "tool_name",
    "display_name",
    "input",
    "description",
    "permission_suggestions",
    "tool_use_id",
}


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "permission_bash")
    monkeypatch.setenv("FAKE_CLAUDE_BASH", "touch permission-bash.txt")


@pytest.mark.usefixtures("fake_env")
def test_fake_asks_and_runs_on_allow(repo: Path, claude_home: Path) -> None:
    with MessagesAPI([]) as api:
        run = drive(FAKE, api, repo, claude_home, "go", allow, timeout=20)
    assert run.returncode == 0
    [ask] = run.control_requests
    assert set(ask["request"]) >= REAL_KEYS
    assert ask["request"]["input"]["command"] == "touch permission-bash.txt"
    assert (repo / "permission-bash.txt").exists()
    assert run.result["permission_denials"] == []


@pytest.mark.usefixtures("fake_env")
def test_fake_deny_is_an_error_tool_result(repo: Path, claude_home: Path) -> None:
    with MessagesAPI([]) as api:
        run = drive(FAKE, api, repo, claude_home, "go", deny("no thanks"), timeout=20)
    assert not (repo / "permission-bash.txt").exists()
    [block] = [b for e in run.of_type("user") for b in e["message"]["content"]]
    assert block["is_error"] is True and block["content"] == "no thanks"
    assert run.result["permission_denials"][0]["tool_name"] == "Bash"


@pytest.mark.usefixtures("fake_env")
def test_fake_without_a_host_refuses(repo: Path) -> None:
    proc = subprocess.run(
        [str(FAKE), "-p", "--output-format", "stream-json", "--verbose"],
        input="go",
        capture_output=True,
        text=True,
        cwd=repo,
        env=dict(os.environ),
        timeout=20,
    )
    assert proc.returncode == 0
    assert '"permission_denied"' in proc.stdout
    assert '"control_request"' not in proc.stdout
    assert not (repo / "permission-bash.txt").exists()
