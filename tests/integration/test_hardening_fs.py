"""Hardening against planted links and foreign files: a real daemon refuses a repository
whose ``.pokeralph`` is a link, a battle never appends to a log planted as a link, the
socket's folder is ours or nothing, and the client only talks to a daemon of its user."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pokeralphctl import client
from pokeralphctl.client import Connection, DaemonNotRunning, RequestFailed, UntrustedSocket
from pokeralphd.server.listener import BoundSocket, ListenerError, bind_socket
from pokeralphd.store.locks import LOCK_GRACE
from tests.helpers import (
    DaemonProcess,
    dead_pid,
    let_go,
    lock_holder,
    make_git_repo,
    run_ctl,
    short_tmpdir,
)
from tests.inproc import ThreadedDaemon
from tests.integration.battle_helpers import run_until, setup_repo

SECRET = b"precious: must never change\n"
OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="planting files of another uid needs root (chown)"
)


@pytest.fixture
def outside(home: Path) -> Path:
    path = home / "outside"
    path.mkdir()
    (path / "target").write_bytes(SECRET)
    return path


def _untouched(outside: Path, *names: str) -> None:
    assert (outside / "target").read_bytes() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == sorted(["target", *names])


# -- a real daemon and planted links in a repository


def test_register_refuses_a_repository_whose_pokeralph_is_a_link(
    daemon: DaemonProcess, repo: Path, outside: Path
) -> None:
    (repo / ".pokeralph").symlink_to(outside)
    with pytest.raises(RequestFailed) as info:
        daemon.call("repo.register", {"path": str(repo)})
    assert str(repo / ".pokeralph") in info.value.message
    assert "symbolic link" in info.value.message
    _untouched(outside)
    assert daemon.call("repo.list") == []


def test_a_planted_lock_link_makes_the_repository_unavailable_at_start(
    home: Path, repo: Path, outside: Path
) -> None:
    first = ThreadedDaemon(home).start()
    try:
        first.call("repo.register", {"path": str(repo)})
    finally:
        first.stop()
    lock = repo / ".pokeralph" / "daemon.lock"
    lock.unlink()
    lock.symlink_to(outside / "target")
    second = ThreadedDaemon(home).start()
    try:
        repos = second.call("daemon.status")["repositories"]
        assert len(repos) == 1 and str(lock) in repos[0]["error"]
    finally:
        second.stop()
    _untouched(outside)


def test_a_battle_never_appends_to_a_log_planted_as_a_link(
    daemon: DaemonProcess, repo: Path, home: Path, outside: Path
) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "complete"})
    log = repo / ".pokeralph" / "battles" / task / "logs" / "iteration-1.log"
    log.parent.mkdir(parents=True)
    log.symlink_to(outside / "target")
    end = {"battle_complete", "battle_failed", "battle_cancelled"}
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), end)
    assert events[-1]["type"] == "battle_complete"  # the battle goes on, unlogged
    _untouched(outside)
    assert log.is_symlink()


# -- the socket's folder


@pytest.fixture
def base() -> Iterator[Path]:
    path = short_tmpdir("prh")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def bound() -> Iterator[list[BoundSocket]]:
    made: list[BoundSocket] = []
    yield made
    for item in made:
        item.close()


@needs_root
def test_a_runtime_folder_made_by_another_user_first_is_refused(base: Path) -> None:
    squatted = base / f"pokeralph-runtime-{os.getuid()}"
    squatted.mkdir(mode=0o755)
    os.chown(squatted, OTHER_UID, OTHER_UID)
    with pytest.raises(ListenerError) as info:
        bind_socket(squatted / "pokeralph" / "pokeralphd.sock")
    assert str(squatted) in str(info.value) and f"uid {OTHER_UID}" in str(info.value)
    assert list(squatted.iterdir()) == []  # nothing of ours made inside their folder


@needs_root
def test_a_pokeralph_folder_of_another_user_is_refused(base: Path) -> None:
    folder = base / "run" / "pokeralph"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    with pytest.raises(ListenerError) as info:
        bind_socket(folder / "pokeralphd.sock")
    assert str(folder) in str(info.value)


def test_a_folder_others_may_write_in_is_refused_on_the_way(base: Path) -> None:
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could rename our folder away
    with pytest.raises(ListenerError) as info:
        bind_socket(shared / "pokeralph" / "pokeralphd.sock")
    assert str(shared) in str(info.value) and "writable by other users" in str(info.value)


def test_missing_levels_are_made_private(base: Path, bound: list[BoundSocket]) -> None:
    path = base / f"pokeralph-runtime-{os.getuid()}" / "pokeralph" / "pokeralphd.sock"
    bound.append(bind_socket(path))
    for level in (path.parent, path.parent.parent):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700


def _loose_folder(base: Path) -> Path:
    """Our socket folder as an older daemon left it: open to others for a while."""
    folder = base / "run" / "pokeralph"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    return folder


def test_a_lock_link_planted_in_the_folder_is_not_written_through(
    base: Path, outside: Path, bound: list[BoundSocket]
) -> None:
    folder = _loose_folder(base)
    (folder / "pokeralphd.sock.lock").symlink_to(outside / "target")
    bound.append(bind_socket(folder / "pokeralphd.sock"))
    _untouched(outside)
    lock = os.lstat(folder / "pokeralphd.sock.lock")
    assert stat.S_ISREG(lock.st_mode) and lock.st_uid == os.getuid()
    assert (folder / "pokeralphd.sock.lock").read_text().strip() == str(os.getpid())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@needs_root
def test_a_lock_file_of_another_user_is_replaced(base: Path, bound: list[BoundSocket]) -> None:
    folder = _loose_folder(base)
    planted = folder / "pokeralphd.sock.lock"
    planted.write_text("theirs")
    os.chown(planted, OTHER_UID, OTHER_UID)
    bound.append(bind_socket(folder / "pokeralphd.sock"))
    assert planted.stat().st_uid == os.getuid()


def _listening(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    return server


def test_a_socket_link_to_an_impostor_is_removed_not_obeyed(
    base: Path, outside: Path, bound: list[BoundSocket]
) -> None:
    folder = _loose_folder(base)
    impostor = _listening(outside / "impostor.sock")
    try:
        (folder / "pokeralphd.sock").symlink_to(outside / "impostor.sock")
        ours = bind_socket(folder / "pokeralphd.sock")  # before: "another pokeralphd runs"
        bound.append(ours)
        assert stat.S_ISSOCK(os.lstat(folder / "pokeralphd.sock").st_mode)
        with Connection(str(folder / "pokeralphd.sock"), timeout=5):
            accepted, _ = ours.sock.accept()
            accepted.close()
    finally:
        impostor.close()


@needs_root
def test_a_socket_of_another_user_in_our_folder_is_removed(
    base: Path, bound: list[BoundSocket]
) -> None:
    folder = _loose_folder(base)
    impostor = _listening(folder / "pokeralphd.sock")
    try:
        os.chown(folder / "pokeralphd.sock", OTHER_UID, OTHER_UID)
        bound.append(bind_socket(folder / "pokeralphd.sock"))
        assert os.lstat(folder / "pokeralphd.sock").st_uid == os.getuid()
    finally:
        impostor.close()


# -- the client talks only to a daemon of its user


def test_the_peer_check_refuses_another_uid() -> None:
    me = os.getuid()
    with pytest.raises(UntrustedSocket) as info:
        client.check_peer("/run/x.sock", me + 1, me)
    assert "/run/x.sock" in str(info.value) and f"uid {me + 1}" in str(info.value)
    assert isinstance(info.value, DaemonNotRunning)  # the CLI's "not running" path, exit 3
    client.check_peer("/run/x.sock", me, me)
    client.check_peer("/run/x.sock", None, me)  # platform cannot tell: the file check stands


def test_the_peer_uid_is_read_from_the_kernel(base: Path) -> None:
    server = _listening(base / "s.sock")
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.connect(str(base / "s.sock"))
        assert client.peer_uid(probe) == os.getuid()
        probe.close()
    finally:
        server.close()


def test_a_peer_of_another_uid_is_refused_before_anything_is_sent(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _listening(base / "s.sock")
    try:
        monkeypatch.setattr(client, "peer_uid", lambda _sock: OTHER_UID)
        with pytest.raises(UntrustedSocket):
            Connection(str(base / "s.sock"), timeout=5)
        accepted, _ = server.accept()
        accepted.settimeout(5)
        assert accepted.recv(1024) == b""  # closed without a byte sent
        accepted.close()
    finally:
        server.close()


def test_a_socket_link_is_refused_by_the_client(base: Path) -> None:
    server = _listening(base / "real.sock")
    server.setblocking(False)
    try:
        (base / "link.sock").symlink_to(base / "real.sock")
        with pytest.raises(UntrustedSocket) as info:
            Connection(str(base / "link.sock"), timeout=5)
        assert str(base / "link.sock") in str(info.value) and "symbolic link" in str(info.value)
        with pytest.raises(BlockingIOError):
            server.accept()  # never even connected
    finally:
        server.close()


@needs_root
def test_a_socket_file_of_another_user_is_refused_by_the_client(base: Path) -> None:
    server = _listening(base / "s.sock")
    server.setblocking(False)
    try:
        os.chown(base / "s.sock", OTHER_UID, OTHER_UID)
        with pytest.raises(UntrustedSocket) as info:
            Connection(str(base / "s.sock"), timeout=5)
        assert f"uid {OTHER_UID}" in str(info.value)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_the_cli_refuses_a_linked_socket_with_a_clear_message(
    daemon: DaemonProcess, home: Path
) -> None:
    link = home / "link.sock"
    link.symlink_to(daemon.socket)
    result = run_ctl(dict(daemon.env, POKERALPH_SOCKET=str(link)), "status")
    assert result.returncode == 3, result.stderr
    assert "refusing to talk to" in result.stderr and str(link) in result.stderr


def test_a_repository_elsewhere_still_registers(daemon: DaemonProcess, home: Path) -> None:
    """The refusals above come from the links: a plain repository is fine."""
    plain = make_git_repo(home / "plain")
    daemon.call("repo.register", {"path": str(plain)})
    assert (plain / ".pokeralph").is_dir() and not (plain / ".pokeralph").is_symlink()


def test_a_dead_daemons_lock_still_held_by_its_child_is_waited_for(
    base: Path, bound: list[BoundSocket]
) -> None:
    """A daemon killed while it started a child (between the fork and the exec, when the
    child still has every descriptor of the daemon) leaves the lock held by that child for
    as long as it takes to exec: on a busy machine, long enough for the next daemon to
    start. Seen in CI: the next daemon said "another pokeralphd is already running". The
    lock names the daemon that took it: it is dead, so the next one waits for the lock."""
    folder = base / "run"
    folder.mkdir(mode=0o700)
    path = folder / "pokeralphd.sock"
    holder = lock_holder(path.with_name(path.name + ".lock"), dead_pid())
    waited: list[float] = []

    def wait(seconds: float) -> None:
        if not waited:
            let_go(holder)  # the child execs: its copy of the descriptor closes
        waited.append(seconds)

    try:
        bound.append(bind_socket(path, sleep=wait))
    finally:
        if holder.poll() is None:
            let_go(holder)
    assert waited and path.with_name(path.name + ".lock").read_text() == f"{os.getpid()}\n"


def test_a_live_daemons_lock_is_refused_at_once_and_a_stuck_one_after_a_while(
    base: Path,
) -> None:
    folder = base / "run"
    folder.mkdir(mode=0o700)
    path = folder / "pokeralphd.sock"
    lock = path.with_name(path.name + ".lock")
    holder = lock_holder(lock, os.getpid())  # a live pid: a daemon that runs
    try:
        with pytest.raises(ListenerError, match="already running"):
            bind_socket(path, sleep=lambda s: pytest.fail("waited for a live daemon"))
    finally:
        let_go(holder)
    dead = dead_pid()
    holder = lock_holder(lock, dead)  # never lets go
    now = [0.0]

    def wait(seconds: float) -> None:
        now[0] += seconds

    try:
        with pytest.raises(ListenerError) as info:
            bind_socket(path, sleep=wait, clock=lambda: now[0])
    finally:
        let_go(holder)
    assert f"pid {dead}" in str(info.value) and "fuser" in str(info.value)
    assert now[0] >= LOCK_GRACE


def test_a_serving_daemon_refuses_a_dead_daemons_held_repository_without_waiting(
    daemon: DaemonProcess, repo: Path
) -> None:
    """Once it serves, the daemon does not wait for such a lock (that wait would block its
    event loop): registering says at once who held it and how to find what holds it."""
    lock = repo / ".pokeralph" / "daemon.lock"
    lock.parent.mkdir()
    gone = dead_pid()
    holder = lock_holder(lock, gone)
    try:
        started = time.monotonic()
        with pytest.raises(RequestFailed) as info:
            daemon.call("repo.register", {"path": str(repo)})
        assert time.monotonic() - started < LOCK_GRACE
    finally:
        let_go(holder)
    assert f"pid {gone}" in info.value.message and "fuser" in info.value.message
    assert daemon.call("repo.list") == []
