"""Fixtures for the CLI tests: run ``pokeralphctl`` in a registered repository (in this
process unless a test asks for the console script: see :func:`tests.helpers.run_ctl`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DaemonProcess, run_ctl

Ctl = Callable[..., subprocess.CompletedProcess[str]]


def envelope(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The single ``--json`` envelope a command printed."""
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {proc.stdout!r} / {proc.stderr!r}"
    data: dict[str, Any] = json.loads(lines[0])
    return data


@pytest.fixture
def registered(daemon: DaemonProcess, repo: Path) -> Path:
    """``repo``, registered through the CLI."""
    proc = run_ctl(daemon.env, "init", str(repo))
    assert proc.returncode == 0, proc.stderr
    return repo


@pytest.fixture
def ctl(daemon: DaemonProcess, registered: Path) -> Ctl:
    """Run ``pokeralphctl`` inside the registered repository (the default --repo)."""

    def run(
        *args: str, input: str | None = None, process: bool = False
    ) -> subprocess.CompletedProcess[str]:
        return run_ctl(daemon.env, *args, cwd=registered, input=input, process=process)

    return run
