"""Fixtures for the CLI tests: run ``pokeralphctl`` in a registered repository."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DaemonProcess

Ctl = Callable[..., subprocess.CompletedProcess[str]]


def run_ctl(
    env: dict[str, str], *args: str, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``pokeralphctl ARGS`` in ``cwd`` with ``env``; never a shell."""
    return subprocess.run(
        [sys.executable, "-m", "pokeralphctl", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        input=input,
        timeout=60,
    )


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

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_ctl(daemon.env, *args, cwd=registered, input=input)

    return run
