"""Subprocess daemons forked from a process that has already imported the daemon.

A test's ``pokeralphd`` process spends ~0.45 s of CPU importing before it listens, and the
suite starts ~30 of them. Each test process keeps one *fork server*: a Python process that
imports ``pokeralphd.cli`` once, then forks a child per request. The child is a real process in its own session,
with the test's environment, working directory, log file and argv, running the same
``main`` that ``python -m pokeralphd`` runs; signals, ``kill -9`` and exit codes behave as
for an exec'd daemon. What only an exec shows (the entry point itself, its imports,
socket activation, a client's autostart) is still tested by exec'ing. So is anything
decided as a module is imported, from the server's environment: a test that needs the
daemon to import under another environment must use ``fork=False``.

The server is the child's parent, so it reaps it; the test process waits on a pidfd and
then asks the server for the exit status. Where pidfds are missing (not Linux), callers
fall back to exec.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
from typing import IO, Any

_SERVER = r"""
import os, sys, json, signal, traceback
import pokeralphd.cli  # what a daemon imports before it listens
# no thread may run here: each request forks this process

def child(req):
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 1 << 16)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = list(req["argv"])
    code = 0
    try:
        exec(compile(req["code"], "<forked daemon>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    # what the interpreter does at exit: join threads, run atexit, flush
    import atexit, threading
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)

out = os.fdopen(1, "w", buffering=1)
for line in sys.stdin:
    req = json.loads(line)
    if "reap" in req:
        _, status = os.waitpid(req["reap"], 0)
        out.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        continue
    pid = os.fork()
    if pid == 0:
        child(req)
    out.write(json.dumps({"pid": pid}) + "\n")
"""

# The command a forked child runs: what ``python -m pokeralphd`` runs.
DAEMON_MAIN = "from pokeralphd.cli import main\nraise SystemExit(main())\n"


class _Server:
    """One fork server per test process, started at first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[str] | None = None

    def _started(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-c", _SERVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            atexit.register(self.close)
        return self.proc

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            proc = self._started()
            stdin: IO[str] | None = proc.stdin
            stdout: IO[str] | None = proc.stdout
            assert stdin is not None and stdout is not None
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"the fork server ended ({proc.wait()})")
            reply: dict[str, Any] = json.loads(line)
            return reply

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the server ends at the end of its input
                self.proc.wait(10)
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()


_server = _Server()


def available() -> bool:
    return hasattr(os, "pidfd_open") and sys.platform == "linux"


class ForkedProcess:
    """The part of ``subprocess.Popen`` the tests use, for a child of the fork server."""

    def __init__(
        self, code: str, argv: list[str], env: dict[str, str], log: str, cwd: str | None = None
    ) -> None:
        self.args = argv
        self.returncode: int | None = None
        reply = _server.ask(
            {"code": code, "argv": argv, "env": env, "log": log, "cwd": cwd or os.getcwd()}
        )
        self.pid: int = reply["pid"]
        self._pidfd = os.pidfd_open(self.pid)

    def _ended(self, timeout: float | None) -> bool:
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))

    def _reap(self) -> int:
        if self.returncode is None:
            self.returncode = int(_server.ask({"reap": self.pid})["code"])
            os.close(self._pidfd)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._ended(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._reap()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped: the pid is still this child's
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
