"""The daemon as a process: socket rules, one daemon per socket, restarts, locks, signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pokeralphctl.client import RequestFailed
from tests.helpers import DaemonProcess, make_git_repo, wait_until
from tests.inproc import ThreadedDaemon


def test_socket_is_private(daemon: DaemonProcess) -> None:
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    status = daemon.call("daemon.status")
    assert status["socket"] == str(daemon.socket)
    # Earlier connections (the start-up ping) close asynchronously; then only ours is left.
    wait_until(lambda: daemon.call("daemon.status")["clients"] == 1, 10, "one client")
    assert status["version"] and status["uptime"] >= 0 and status["repositories"] == []


def test_second_daemon_refuses_to_start(daemon: DaemonProcess) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "pokeralphd"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 1
    assert "already running" in second.stderr and str(daemon.socket) in second.stderr
    assert daemon.call("daemon.ping") == "pong"


def test_stale_socket_is_cleaned_up(home: Path) -> None:
    first = DaemonProcess(home).start()
    first.kill9()
    assert first.socket.exists()  # a dead daemon's socket stays behind
    second = ThreadedDaemon(home).start()  # the start-up under test needs no process
    try:
        assert second.call("daemon.ping") == "pong"
    finally:
        second.stop()


def test_sigterm_and_sigint_exit_zero_and_remove_the_socket(home: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = DaemonProcess(home, fork=False).start()  # `python -m pokeralphd` itself
        assert proc.stop(sig) == 0
        assert not proc.socket.exists()
        assert "stopped" in proc.logs()


def test_signals_during_the_whole_shutdown_never_kill_it(home: Path, repo: Path) -> None:
    """A service manager (or an impatient person) may signal again while the daemon stops:
    up to the last step, it still exits cleanly (0), its socket removed."""
    proc = DaemonProcess(home).start()
    proc.call("repo.register", {"path": str(repo)})
    assert proc.proc is not None
    # The second signal right after the first, with nothing between them (a poll in
    # between now and then found a daemon with nothing to stop already gone): one always
    # meets a shutdown under way. Then more, paced, until it is gone.
    proc.proc.send_signal(signal.SIGTERM)
    proc.proc.send_signal(signal.SIGINT)
    sent = 2
    while proc.proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.proc.wait(timeout=0.002)  # paces the signals; not a synchronisation
        if proc.proc.poll() is None:
            proc.proc.send_signal(signal.SIGTERM if sent % 2 == 0 else signal.SIGINT)
            sent += 1
    proc.log.close()
    assert proc.proc.returncode == 0, proc.logs()[-2000:]
    assert sent > 1 and not proc.socket.exists()


def test_daemon_shutdown_method(home: Path) -> None:
    proc = DaemonProcess(home).start()
    assert proc.call("daemon.shutdown") == {"stopping": True}
    assert proc.proc is not None and proc.proc.wait(20) == 0
    proc.log.close()


def test_restart_keeps_registry_and_data(home: Path, repo: Path) -> None:
    first = ThreadedDaemon(home).start()  # the second, a real process, finds its files
    first.call("repo.register", {"path": str(repo), "name": "demo"})
    first.call(
        "task.create",
        {"repo": "demo", "title": "Keep me", "description": "d", "acceptanceCriteria": ["c"]},
    )
    first.call("config.update", {"repo": "demo", "patch": {"mode": "yolo"}})
    first.stop()
    registry = json.loads((home / "state" / "pokeralph" / "registry.json").read_text())
    assert registry["repos"][0]["path"] == str(repo)
    second = DaemonProcess(home).start()
    try:
        tasks = second.call("task.list", {"repo": str(repo / "sub" / "dir")})["tasks"]
        assert [t["id"] for t in tasks] == ["001-keep-me"]
        assert second.call("config.get", {"repo": "demo"})["config"]["mode"] == "yolo"
    finally:
        second.stop()


def test_a_repository_belongs_to_one_daemon(home: Path, repo: Path) -> None:
    first = ThreadedDaemon(home).start()  # and the second a process: a lock across processes
    other_home = home / "other"
    other_home.mkdir()
    second = DaemonProcess(other_home).start()
    try:
        first.call("repo.register", {"path": str(repo)})
        with pytest.raises(RequestFailed) as info:
            second.call("repo.register", {"path": str(repo)})
        assert info.value.code == -32007 and info.value.data["pid"] == first.pid
        first.call("repo.unregister", {"repo": str(repo)})
        assert second.call("repo.register", {"path": str(repo)})["name"] == "repo"
    finally:
        first.stop()
        second.stop()


def test_register_refuses_non_git_folders_unless_asked(daemon: DaemonProcess, home: Path) -> None:
    plain = home / "plain"
    plain.mkdir()
    with pytest.raises(RequestFailed) as info:
        daemon.call("repo.register", {"path": str(plain)})
    assert info.value.code == -32006 and "gitInit" in info.value.message
    assert not (plain / ".pokeralph").exists()
    result = daemon.call("repo.register", {"path": str(plain), "gitInit": True})
    assert result["path"] == str(plain) and (plain / ".git").is_dir()
    assert (plain / ".pokeralph" / "config.json").is_file()
    for bad in ("relative/path", str(home / "missing"), "/etc/passwd"):
        with pytest.raises(RequestFailed) as info:
            daemon.call("repo.register", {"path": bad})
        assert info.value.code == -32001


def test_corrupt_file_is_reported_not_overwritten(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    prd = repo / ".pokeralph" / "prd.json"
    prd.write_text('{"name": "x", "description": "d", "tasks": [{"id": "../../etc"}]}')
    with pytest.raises(RequestFailed) as info:
        daemon.call(
            "task.create",
            {"title": "T", "description": "d", "acceptanceCriteria": ["c"], "repo": str(repo)},
        )
    assert info.value.code == -32005
    assert info.value.data["file"] == str(prd) and info.value.data["field"] == "tasks[0].id"
    assert "../../etc" in prd.read_text()


def test_peer_from_another_uid_is_refused(daemon: DaemonProcess, home: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another uid")
    # The 0700 folders already keep other users out; open them to reach the peer check.
    for folder in (home, daemon.socket.parent):
        os.chmod(folder, 0o755)
    os.chmod(daemon.socket, 0o666)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody, connect, report what happened
        verdict = b"error"
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(str(daemon.socket))
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n')
            verdict = b"closed" if s.recv(100) == b"" else b"answered"
        except (ConnectionResetError, BrokenPipeError):
            verdict = b"closed"  # closed before or after our request was read
        except OSError as exc:
            verdict = repr(exc).encode()
        finally:
            os.write(write_end, verdict)
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    answer = os.read(read_end, 200).decode()
    os.close(read_end)
    assert answer == "closed"
    assert "refused a connection from uid 65534" in daemon.logs()


def test_socket_path_too_long_is_a_clear_error(home: Path) -> None:
    env = dict(os.environ, POKERALPH_SOCKET=str(home / ("x" * 120) / "d.sock"))
    out = subprocess.run(
        [sys.executable, "-m", "pokeralphd"], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 1 and "too long" in out.stderr


def test_repositories_by_name_path_and_cwd(daemon: DaemonProcess, home: Path) -> None:
    a = make_git_repo(home / "a")
    b = make_git_repo(home / "b")
    daemon.call("repo.register", {"path": str(a)})
    daemon.call("repo.register", {"path": str(b), "name": "bee"})
    assert [r["name"] for r in daemon.call("repo.list")] == ["a", "bee"]
    assert daemon.call("repo.status", {"repo": "bee"})["path"] == str(b)
    assert daemon.call("repo.status", {"repo": str(a / "deep")})["name"] == "a"
    with pytest.raises(RequestFailed) as info:
        daemon.call("task.list")
    assert info.value.code == -32001 and info.value.data["known"] == ["a", "bee"]
    with pytest.raises(RequestFailed):
        daemon.call("repo.register", {"path": str(a / ".."), "name": "bad name!"})


def test_raw_socket_garbage_does_not_kill_the_daemon(daemon: DaemonProcess) -> None:
    for junk in (b"\x00" * 100, b"\n\n\n", b"Content-Length: abc\r\n\r\n", b"{" * 10000 + b"\n"):
        with daemon.raw() as sock:
            sock.sendall(junk)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
    assert daemon.call("daemon.ping") == "pong"
