"""``ping``, ``status``, ``repos``, ``init``, ``unregister``, usage errors and exit codes."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli.conftest import Ctl, envelope
from tests.helpers import DaemonProcess, run_ctl, short_tmpdir


def test_no_daemon_exits_3_and_says_how_to_start_it() -> None:
    nothing = short_tmpdir() / "nothing.sock"
    env = dict(os.environ, POKERALPH_SOCKET="/nonexistent/elsewhere.sock")
    env["POKERALPH_NO_AUTOSTART"] = "1"  # say so, rather than start a daemon on demand
    for command in ("ping", "status"):
        proc = run_ctl(env, "--socket", str(nothing), command)
        assert proc.returncode == 3
        assert str(nothing) in proc.stderr  # --socket wins over $POKERALPH_SOCKET
        assert "pokeralphctl daemon start" in proc.stderr
        assert "systemctl --user start pokeralphd" in proc.stderr
        assert "Traceback" not in proc.stderr
    # the console script, as a user runs it: its exit code when nothing answers
    proc = run_ctl(env, "status", "--json", "--socket", str(nothing), process=True)
    assert proc.returncode == 3
    error = envelope(proc)["error"]
    assert error["code"] == "daemon_not_running"
    assert error["data"] == {"socket": str(nothing)}
    nothing.parent.rmdir()


def test_ping(daemon: DaemonProcess) -> None:
    # Most CLI tests run pokeralphctl in this process; this one and `status --json` above
    # run the console script, as a user does.
    proc = daemon.ctl("ping", process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pong")
    assert envelope(daemon.ctl("ping", "--json")) == {"ok": True, "result": "pong"}


def test_status_one_line_per_repository(ctl: Ctl, registered: Path) -> None:
    assert ctl("task", "add", "First", "-d", "d", "-c", "c").returncode == 0
    assert ctl("task", "add", "Second", "-d", "d", "-c", "c").returncode == 0
    proc = ctl("status")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("pokeralphd ") and "pid " in lines[0]
    (line,) = [line for line in lines if str(registered) in line]
    assert line.split()[0] == "repo" and "2 pending" in line
    result = envelope(ctl("status", "--json"))["result"]
    assert result["daemon"]["pid"] > 0
    assert result["repos"][0]["tasks"] == {"pending": 2}


def test_repos_init_and_unregister(daemon: DaemonProcess, home: Path) -> None:
    plain = home / "plain"
    plain.mkdir()
    proc = run_ctl(daemon.env, "init", cwd=plain)
    assert proc.returncode == 1
    assert "not a git repository" in proc.stderr and "--git-init" in proc.stderr
    failed = envelope(run_ctl(daemon.env, "init", str(plain), "--json"))
    assert failed["ok"] is False and failed["error"]["code"] == -32006

    proc = run_ctl(daemon.env, "init", "--git-init", "--name", "fresh", cwd=plain)
    assert proc.returncode == 0, proc.stderr
    assert "registered fresh" in proc.stdout
    listed = envelope(daemon.ctl("repos", "--json"))["result"]
    assert [r["name"] for r in listed] == ["fresh"]
    assert "fresh" in daemon.ctl("repos").stdout

    proc = daemon.ctl("unregister", "fresh")
    assert proc.returncode == 0, proc.stderr
    assert envelope(daemon.ctl("repos", "--json"))["result"] == []
    assert "no repositories" in daemon.ctl("repos").stdout


def test_unknown_repo_says_what_to_do(daemon: DaemonProcess, home: Path) -> None:
    proc = run_ctl(daemon.env, "task", "list", cwd=home)
    assert proc.returncode == 1
    assert "pokeralphctl init" in proc.stderr
    proc = daemon.ctl("task", "list", "--repo", "nope", "--json")
    assert envelope(proc)["error"]["code"] == -32001


def test_usage_errors_exit_2(daemon: DaemonProcess) -> None:
    proc = daemon.ctl("task", "add", "no description")
    assert proc.returncode == 2
    assert "--description" in proc.stderr
    proc = daemon.ctl("task", "add", "x", "--json")
    assert proc.returncode == 2
    assert envelope(proc)["error"]["code"] == "usage"
    proc = daemon.ctl("frobnicate")
    assert proc.returncode == 2
    proc = daemon.ctl("task")
    assert proc.returncode == 2 and "ACTION" in proc.stderr


def test_help_documents_exit_codes(daemon: DaemonProcess) -> None:
    proc = daemon.ctl("--help")
    assert proc.returncode == 0
    for text in ("exit codes:", "3  the daemon is not running", "4  interrupted", "--json"):
        assert text in proc.stdout
