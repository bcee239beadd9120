"""pokeralphd as a user service: units that systemd accepts, socket activation with
systemd's own tool, the notify protocol on a datagram socket, the launchd plist, and
`pokeralphctl service` / autostart / completion."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pokeralphctl import units
from pokeralphctl.client import Connection
from tests.helpers import REPO_ROOT, DaemonProcess, run_ctl, wait_until

PYTHON_BIN = Path(sys.executable).parent


def test_repository_units_are_the_templates() -> None:
    assert (REPO_ROOT / "systemd" / "pokeralphd.service").read_text() == units.SERVICE
    assert (REPO_ROOT / "systemd" / "pokeralphd.socket").read_text() == units.SOCKET
    assert (REPO_ROOT / "launchd" / f"{units.LABEL}.plist").read_text() == units.PLIST
    for key in (
        "Type=notify",
        "Restart=on-failure",
        "KillMode=mixed",
        "UMask=0077",
        "TimeoutStopSec=",
        "WatchdogSec=",
    ):
        assert key in units.SERVICE
    for key in (
        "ListenStream=%t/pokeralph/pokeralphd.sock",
        "SocketMode=0600",
        "DirectoryMode=0700",
    ):
        assert key in units.SOCKET


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)
def test_units_pass_systemd_analyze_verify(home: Path) -> None:
    folder = home / "units"
    folder.mkdir()
    (folder / "pokeralphd.service").write_text(
        units.render(units.SERVICE, str(PYTHON_BIN / "pokeralphd"), str(home))
    )
    (folder / "pokeralphd.socket").write_text(units.SOCKET)
    runtime = home / "xdg"
    runtime.mkdir(mode=0o700)
    out = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "--user",
            "--recursive-errors=no",
            "pokeralphd.service",
            "pokeralphd.socket",
        ],
        cwd=folder,
        env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    ours = [line for line in (out.stdout + out.stderr).splitlines() if "pokeralphd" in line]
    assert out.returncode == 0 and not ours, out.stdout + out.stderr


def test_launchd_plist_has_what_launchd_needs() -> None:
    plist = plistlib.loads(units.render(units.PLIST, "/opt/bin/pokeralphd", "/Users/me").encode())
    assert plist["Label"] == "com.pokeralph.pokeralphd"
    assert plist["ProgramArguments"] == ["/opt/bin/pokeralphd"]
    assert plist["KeepAlive"] == {"SuccessfulExit": False} and plist["RunAtLoad"] is True
    assert plist["StandardErrorPath"] == "/Users/me/Library/Logs/pokeralph/pokeralphd.log"
    assert all(
        Path(p).is_absolute() for p in (plist["StandardOutPath"], plist["ProgramArguments"][0])
    )


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None,
    reason="systemd-socket-activate is not installed",
)
def test_socket_activation_with_systemds_own_tool(home: Path) -> None:
    sock = home / "act" / "d.sock"
    sock.parent.mkdir(mode=0o700)
    env = [
        "-E",
        f"XDG_STATE_HOME={home / 'state'}",
        "-E",
        f"XDG_CONFIG_HOME={home / 'config'}",
        "-E",
        f"POKERALPH_SOCKET={sock}",
        "-E",
        "PYTHONUNBUFFERED=1",
    ]
    log = (home / "act.log").open("w")
    proc = subprocess.Popen(
        [
            "systemd-socket-activate",
            "-l",
            str(sock),
            "--fdname=pokeralphd",
            *env,
            sys.executable,
            "-m",
            "pokeralphd",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        # The file appears at bind(), a moment before listen(): wait for a connection to
        # be taken (the first one starts the daemon, which then takes the rest).
        wait_until(lambda: _accepts(sock), 20, "systemd-socket-activate to listen")
        with Connection(str(sock)) as conn:
            assert conn.call("daemon.ping") == "pong"
            status = conn.call("daemon.status")
        assert status["activated"] is True and status["socket"] == str(sock)
        os.kill(status["pid"], signal.SIGTERM)
        proc.wait(20)
        assert sock.exists()  # systemd's socket: pokeralphd never unlinks it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def notify_socket(home: Path) -> tuple[socket.socket, Path]:
    path = home / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(20)
    return sock, path


def test_notify_ready_status_watchdog_and_stopping(home: Path) -> None:
    listener, path = notify_socket(home)
    daemon = DaemonProcess(home)
    daemon.env.update(NOTIFY_SOCKET=str(path), WATCHDOG_USEC="400000")
    daemon.start()
    try:
        messages: list[str] = []
        while not any("READY=1" in m for m in messages) or not any(
            "WATCHDOG=1" in m for m in messages
        ):
            messages.append(listener.recv(4096).decode())
        ready = next(m for m in messages if "READY=1" in m)
        assert f"MAINPID={daemon.proc.pid}" in ready and "STATUS=serving 0 repositories" in ready  # type: ignore[union-attr]
        daemon.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        while "STOPPING=1" not in messages[-1]:
            messages.append(listener.recv(4096).decode())
    finally:
        assert daemon.stop() == 0
        listener.close()


def test_abstract_notify_socket(home: Path) -> None:
    from pokeralphd.server.notify import Notifier

    name = f"pokeralph-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0" + name)
    listener.settimeout(5)
    try:
        notifier = Notifier("@" + name, 2_000_000)
        notifier.status("hello")
        assert listener.recv(100) == b"STATUS=hello"
        assert notifier.watchdog_interval() == 1.0
        assert Notifier(None, None).send("x") is False
        assert Notifier(str(home / "missing.sock"), None).send("x") is False  # never raises
    finally:
        listener.close()


def test_service_install_and_uninstall(home: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(home / "cfg"), HOME=str(home))
    first = run_ctl(env, "service", "install")
    assert first.returncode == 0, first.stderr
    unit = home / "cfg" / "systemd" / "user" / "pokeralphd.service"
    text = unit.read_text()
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    binary = Path(exec_start.split("=", 1)[1])
    assert binary.is_absolute() and binary.exists()
    assert (
        "systemctl --user daemon-reload && systemctl --user enable --now pokeralphd.socket"
        in first.stdout
    )
    unit.write_text(text + "\n# edited by hand\n")
    refused = run_ctl(env, "service", "install")
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert run_ctl(env, "service", "install", "--force").returncode == 0
    status = run_ctl(env, "--json", "service", "status")
    assert json.loads(status.stdout)["result"]["answering"] is False
    removed = run_ctl(env, "service", "uninstall")
    assert removed.returncode == 0 and not unit.exists()


def test_autostart_starts_a_daemon_on_demand(home: Path) -> None:
    env = dict(os.environ)
    env.pop("POKERALPH_NO_AUTOSTART", None)
    env.update(
        XDG_STATE_HOME=str(home / "state"),
        XDG_CONFIG_HOME=str(home / "config"),
        POKERALPH_SOCKET=str(home / "run" / "d.sock"),
        HOME=str(home),
    )
    ping = run_ctl(env, "ping")
    assert ping.returncode == 3  # diagnostics report the truth, they do not start anything
    # a process: the daemon it starts must outlive it and leave its pipes closed
    listed = run_ctl(env, "repos", process=True)
    try:
        assert listed.returncode == 0, listed.stderr
        assert "started pokeralphd in the background" in listed.stderr
        assert run_ctl(env, "ping").returncode == 0
        assert run_ctl(dict(env, POKERALPH_NO_AUTOSTART="1"), "repos").returncode == 0
    finally:
        assert run_ctl(env, "daemon", "stop").returncode == 0
    opted_out = run_ctl(env, "--no-autostart", "repos")
    assert opted_out.returncode == 3


def test_completion_scripts() -> None:
    for shell in ("bash", "zsh", "fish"):
        out = run_ctl(dict(os.environ), "completion", shell)
        assert out.returncode == 0 and "battle" in out.stdout and "approve" in out.stdout
    script = run_ctl(dict(os.environ), "completion", "bash").stdout
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_completion_offers_every_subcommand_the_parser_takes() -> None:
    """The completion lists are written by hand: each must name exactly the subcommands
    (or the positional choices) its command's parser accepts, aliases aside."""
    import argparse

    from pokeralphctl.cli import COMMANDS, build_parser
    from pokeralphctl.commands.completion import SUBCOMMANDS

    for name in COMMANDS:
        _, built = build_parser([name])
        accepted: list[str] = []
        for action in built[name]._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen: set[int] = set()
                for choice, parser in action.choices.items():
                    if id(parser) not in seen:  # an alias shares its command's parser
                        seen.add(id(parser))
                        accepted.append(choice)
            elif action.choices and not action.option_strings and action.dest != "command":
                accepted += [str(c) for c in action.choices]
        assert accepted == SUBCOMMANDS.get(name, []), name
