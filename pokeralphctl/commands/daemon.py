"""``pokeralphctl daemon start|stop|status``: run pokeralphd without a service manager.

``start`` spawns ``python -m pokeralphd`` in its own session (stdin from /dev/null,
output appended to ``pokeralphd.log`` in the user state dir) and waits until it answers;
with a service manager prefer ``systemctl --user start pokeralphd``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pokeralph_core.paths import APP
from pokeralphctl.client import DaemonNotRunning, RequestFailed
from pokeralphctl.commands import CommandError
from pokeralphctl.commands.status import fetch_status, print_status
from pokeralphctl.parsing import sub

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from pokeralphctl.commands import Context
    from pokeralphctl.terminal import Terminal

START_DEADLINE = 10.0
STOP_DEADLINE = 20.0
LOG_NAME = "pokeralphd.log"


def add_daemon(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub(subs, "start", "start pokeralphd in the background (no-op if it runs)")
    p.add_argument(
        "--foreground", action="store_true", help="run it here, in the foreground, instead"
    )
    p.set_defaults(handler=start)
    p = sub(subs, "stop", "ask pokeralphd to shut down and wait until it has")
    p.set_defaults(handler=stop)
    p = sub(subs, "status", "whether pokeralphd runs, and what it serves")
    p.set_defaults(handler=status)


def state_dir(term: Terminal) -> Path:
    """The user state dir, as the daemon's platformdirs computes it (standard library)."""
    if sys.platform == "darwin":
        return Path(term.abspath("~/Library/Application Support")) / APP
    return Path(term.xdg_dir("XDG_STATE_HOME", ".local/state")) / APP


def log_file(term: Terminal) -> Path:
    return state_dir(term) / LOG_NAME


def ping(ctx: Context) -> bool:
    """Whether a daemon answers ``daemon.ping``."""
    try:
        return bool(ctx.call("daemon.ping") == "pong")
    except (DaemonNotRunning, RequestFailed, OSError):
        return False


def reachable(ctx: Context) -> bool:
    """Whether anything still accepts connections on the socket."""
    try:
        ctx.connect(1.0).close()
    except DaemonNotRunning:
        return False
    return True


def daemon_command(socket: str | Path) -> list[str]:
    return [sys.executable, "-m", "pokeralphd", "--socket", str(socket)]


def spawn(argv: list[str], log: Path, env: Mapping[str, str]) -> int:
    """Start the daemon detached from this terminal, with ``env``; return its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
    except NotImplementedError:  # no POSIX_SPAWN_SETSID: a process group of its own
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0)


def exited(pid: int) -> int | None:
    """The child's exit code if it has ended (reaping it), else None."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if done else None


def reap_if_ours(pid: int, deadline: float) -> None:
    """Wait (until ``deadline``) for a stopped daemon that this process started, so a
    program running pokeralphctl in-process keeps no zombie; nothing for anyone else's."""
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not our child: its parent (or init) reaps it
        if done:
            return
        time.sleep(0.01)


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl daemon start``."""
    out = ctx.out
    path = ctx.socket()
    if ping(ctx):
        if out.json:
            out.ok({"started": False, "running": True, "socket": str(path)})
        else:
            out.line(f"pokeralphd is already running on {path}")
        return 0
    if args.foreground:
        ctx.term.stdout.flush()
        os.execve(sys.executable, daemon_command(path), ctx.term.env)  # becomes the daemon
    log = log_file(ctx.term)
    pid = spawn(daemon_command(path), log, ctx.term.env)
    deadline = time.monotonic() + START_DEADLINE
    delay = 0.01
    while not ping(ctx):
        code = exited(pid)
        if code is not None or time.monotonic() > deadline:
            why = (
                f"exited with {code}"
                if code is not None
                else f"did not answer in {START_DEADLINE:.0f}s"
            )
            raise CommandError(
                f"pokeralphd {why}; its log ({log}) ends with:\n{log_tail(log)}",
                "fix what the log says, or run `pokeralphctl daemon start --foreground` to see it",
                data={"pid": pid, "log": str(log), "exitCode": code},
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    result: dict[str, Any] = {"started": True, "pid": pid, "socket": str(path), "log": str(log)}
    if out.json:
        out.ok(result)
    else:
        out.line(f"pokeralphd started: pid {pid}, socket {path}")
        out.note(f"log: {log}", "dim")
    return 0


def stop(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl daemon stop``."""
    out = ctx.out
    path = ctx.socket()
    try:
        conn = ctx.connect(STOP_DEADLINE)
    except DaemonNotRunning:
        if out.json:
            out.ok({"stopped": False, "running": False, "socket": str(path)})
        else:
            out.line(f"pokeralphd is not running on {path}")
        return 0
    deadline = time.monotonic() + STOP_DEADLINE
    with conn:
        pid = conn.call("daemon.status")["pid"]
        conn.call("daemon.shutdown")
        try:  # it closes our connection as it goes
            for _ in conn.messages():
                pass
        except OSError:
            pass
    delay = 0.01
    while reachable(ctx):
        if time.monotonic() > deadline:
            raise CommandError(
                f"pokeralphd (pid {pid}) still answers after {STOP_DEADLINE:.0f}s",
                f"see its log ({log_file(ctx.term)}); end it with `kill {pid}` if it hangs",
                data={"pid": pid},
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    if isinstance(pid, int):
        reap_if_ours(pid, deadline)
    if out.json:
        out.ok({"stopped": True, "pid": pid, "socket": str(path)})
    else:
        out.line(f"pokeralphd stopped (pid {pid})")
    return 0


def status(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl daemon status``."""
    result = fetch_status(ctx)
    result["log"] = str(log_file(ctx.term))
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        print_status(ctx.out, result)
        ctx.out.note(f"log: {result['log']}", "dim")
    return 0
