"""The fork server's children behave as ``subprocess.Popen`` children do for the tests."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests import forkserver

pytestmark = pytest.mark.skipif(not forkserver.available(), reason="needs pidfd (Linux)")


def forked(tmp_path: Path, code: str, *argv: str) -> forkserver.ForkedProcess:
    env = dict(os.environ, FORKED_MARK="yes")
    return forkserver.ForkedProcess(
        code, ["prog", *argv], env, str(tmp_path / "log"), cwd=str(tmp_path)
    )


def test_exit_codes_argv_env_cwd_and_output(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "print(sys.argv[1:], os.environ['FORKED_MARK'], os.getcwd())\n"
        "print('to stderr', file=sys.stderr)\n"
        "raise SystemExit(int(sys.argv[1]))\n"
    )
    assert forked(tmp_path, code, "3").wait(10) == 3
    assert forked(tmp_path, code, "0").wait(10) == 0
    log = (tmp_path / "log").read_text()
    assert f"['3'] yes {tmp_path}" in log and "to stderr" in log
    assert forked(tmp_path, "raise ValueError('boom')").wait(10) == 1
    assert "ValueError: boom" in (tmp_path / "log").read_text()


def test_signals_wait_timeout_and_its_own_session(tmp_path: Path) -> None:
    child = forked(tmp_path, "import os, time\nprint(os.getsid(0) == os.getpid())\ntime.sleep(60)")
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.05)
    assert child.poll() is None
    child.send_signal(signal.SIGTERM)
    assert child.wait(10) == -signal.SIGTERM
    child.kill()  # reaped: no signal goes to a pid that may be reused
    assert child.poll() == -signal.SIGTERM
    assert "True" in (tmp_path / "log").read_text()


def test_atexit_and_threads_run_at_exit_as_in_an_interpreter(tmp_path: Path) -> None:
    code = (
        "import atexit, threading, time\n"
        "atexit.register(print, 'atexit ran')\n"
        "threading.Thread(target=lambda: (time.sleep(0.1), print('thread done'))).start()\n"
    )
    assert forked(tmp_path, code).wait(10) == 0
    assert (tmp_path / "log").read_text().splitlines() == ["thread done", "atexit ran"]


def test_stdin_is_empty_and_no_descriptor_leaks_in(tmp_path: Path) -> None:
    code = "import os, sys\nprint(repr(sys.stdin.read()), sorted(os.listdir('/proc/self/fd')))"
    assert forked(tmp_path, code).wait(10) == 0
    # 0-2, and the one listdir opens
    assert (tmp_path / "log").read_text().strip() == "'' ['0', '1', '2', '3']"
