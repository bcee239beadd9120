"""The README's first quickstart line: `pokeralphctl demo` runs a whole battle live."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers import DaemonProcess


def test_demo_runs_a_whole_battle(daemon: DaemonProcess, home: Path) -> None:
    target = home / "demo"
    result = daemon.ctl("demo", str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "battle_complete" in result.stdout and "DEMO agent" in result.stderr
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
    again = daemon.ctl("demo", str(target), "--json")
    assert again.returncode == 0 and (home / "demo-2" / "textstats.py").exists()
