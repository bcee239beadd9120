"""The README's first quickstart line: `pokeralphctl demo` runs a whole battle live."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralphctl.cli import build_parser
from pokeralphctl.commands import demo as demo_command
from pokeralphctl.commands.demo import agent_config
from pokeralphd.agents import demo_agent
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.demo import DemoBackend
from tests.helpers import DaemonProcess


def test_demo_runs_a_whole_battle(daemon: DaemonProcess, home: Path) -> None:
    target = home / "demo"
    # At full speed (the default pace is for people watching).
    result = daemon.ctl("demo", str(target), "--pace", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "battle_complete" in result.stdout and "DEMO agent" in result.stderr
    agent = daemon.call("config.get", {"repo": str(target)})["config"]["agent"]
    assert agent["backend"] == "demo" and agent["extraArgs"] == ["--pace", "0"]
    log = subprocess.run(
        ["git", "-C", str(target), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    subjects = log.stdout.splitlines()
    assert (
        subjects.count("[PokéRalph] 001-implement-text-statistics: Implement text statistics") == 2
    )
    tests = subprocess.run(
        ["python3", "-m", "unittest", "-q"], cwd=target, capture_output=True, text=True
    )
    assert tests.returncode == 0, tests.stderr
    # A second run makes a fresh copy beside the first.
    again = daemon.ctl("demo", str(target), "--json", "--pace", "0")
    assert again.returncode == 0 and (home / "demo-2" / "textstats.py").exists()


def test_the_demo_is_watchable_unless_told_otherwise() -> None:
    """Without ``--pace`` nothing reaches the agent, whose own pace is one a person can follow."""
    argv = ["demo"]
    assert build_parser(argv)[0].parse_args(argv).pace is None
    assert agent_config(None) == {"backend": "demo", "extraArgs": []}
    request = AgentRequest(prompt="p", cwd=Path("."), mode="execute", config=AgentConfig())
    assert DemoBackend().argv(request) == [sys.executable, "-m", "pokeralphd.agents.demo_agent"]
    assert demo_agent.parse_pace([]) == demo_agent.DEFAULT_PACE >= 0.05
    # --pace goes from the command line through agent.extraArgs to the agent.
    argv = ["demo", "--pace", "0"]
    assert build_parser(argv)[0].parse_args(argv).pace == 0
    fast = AgentRequest(
        prompt="p", cwd=Path("."), mode="execute", config=AgentConfig(extra_args=["--pace", "0"])
    )
    assert demo_agent.parse_pace(DemoBackend().argv(fast)[3:]) == 0
    # Arguments meant for another backend do not stop the demo.
    assert demo_agent.parse_pace(["--dangerously-skip-permissions"]) == demo_agent.DEFAULT_PACE


@pytest.mark.parametrize("pace", ["-1", "6", "nan", "soon"])
def test_a_pace_out_of_range_is_a_usage_error(pace: str) -> None:
    argv = ["demo", "--pace", pace]
    with pytest.raises(SystemExit):
        build_parser(argv)[0].parse_args(argv)
    with pytest.raises(SystemExit):
        demo_agent.parse_pace(["--pace", pace])


def test_the_client_and_the_agent_take_the_same_paces() -> None:
    """``pokeralphctl demo`` checks ``--pace`` itself (the client imports nothing of the
    daemon's package), so a bad value is a usage error at once rather than a failed agent
    mid-battle; its bounds are the agent's."""
    assert demo_command.MAX_PACE == demo_agent.MAX_PACE
    for pace in ("0", f"{demo_agent.MAX_PACE:g}"):
        argv = ["demo", "--pace", pace]
        assert build_parser(argv)[0].parse_args(argv).pace == float(pace)
        assert demo_agent.parse_pace(["--pace", pace]) == float(pace)
