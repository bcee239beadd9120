"""``daemon start|stop|status``: a detached daemon in a temporary XDG environment."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import envelope
from tests.helpers import pid_alive, run_ctl, short_tmpdir, wait_until


def end(pid: int) -> None:
    """Terminate a daemon we started, escalating to SIGKILL if it hangs."""
    if not pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not pid_alive(pid), 20, "the daemon to exit")
    except AssertionError:
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def xdg() -> Iterator[tuple[Path, dict[str, str], list[int]]]:
    """A temp home with XDG dirs; any daemon pid appended to the list is ended afterwards."""
    home = short_tmpdir()
    env = dict(os.environ)
    env.update(
        {
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_RUNTIME_DIR": str(home / "xdg-run"),
            "POKERALPH_SOCKET": str(home / "env.sock"),  # --socket must win over it
            "POKERALPH_NO_AUTOSTART": "1",
        }
    )
    env.pop("NOTIFY_SOCKET", None)
    env.pop("LISTEN_FDS", None)
    pids: list[int] = []
    yield home, env, pids
    for pid in pids:
        end(pid)
    shutil.rmtree(home, ignore_errors=True)


def test_start_status_stop(xdg: tuple[Path, dict[str, str], list[int]]) -> None:
    home, env, pids = xdg
    sock = str(home / "d.sock")
    proc = run_ctl(env, "--socket", sock, "daemon", "start", "--json")
    assert proc.returncode == 0, proc.stderr
    result = envelope(proc)["result"]
    pids.append(result["pid"])
    assert result["started"] is True and result["socket"] == sock
    log = home / "state" / "pokeralph" / "pokeralphd.log"
    assert result["log"] == str(log)
    assert log.exists()

    proc = run_ctl(env, "daemon", "start", "--socket", sock)
    assert proc.returncode == 0 and "already running" in proc.stdout
    assert run_ctl(env, "ping", "--socket", sock).returncode == 0
    assert run_ctl(env, "ping").returncode == 3  # $POKERALPH_SOCKET points elsewhere
    status = run_ctl(env, "daemon", "status", "--socket", sock)
    assert status.returncode == 0 and f"pid {result['pid']}" in status.stdout

    proc = run_ctl(env, "daemon", "stop", "--socket", sock)
    assert proc.returncode == 0, proc.stderr
    assert f"stopped (pid {result['pid']})" in proc.stdout
    assert run_ctl(env, "ping", "--socket", sock).returncode == 3
    # `daemon stop` waited for the daemon it started here (in this process): no zombie left
    with pytest.raises(ChildProcessError):
        os.waitpid(result["pid"], os.WNOHANG)
    proc = run_ctl(env, "daemon", "stop", "--socket", sock)
    assert proc.returncode == 0 and "not running" in proc.stdout


def test_start_reports_a_daemon_that_cannot_start(
    xdg: tuple[Path, dict[str, str], list[int]],
) -> None:
    home, env, _ = xdg
    too_long = str(home / ("x" * 120) / "d.sock")  # beyond the AF_UNIX path limit
    proc = run_ctl(env, "daemon", "start", "--socket", too_long)
    assert proc.returncode == 1
    assert "pokeralphd exited" in proc.stderr and "--foreground" in proc.stderr
