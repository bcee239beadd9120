"""Test helpers: a real pokeralphd in a subprocess on a short temp socket, real git repos.

``DaemonProcess`` starts a ``pokeralphd`` process with its own XDG dirs (forked from the
test process's fork server, or ``python -m pokeralphd`` exec'd), waits until it answers
``daemon.ping`` (polling with a deadline, never a fixed sleep), and talks to it through
the standard-library client, exactly as any other client would.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import importlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from pokeralphctl.client import Connection, DaemonNotRunning
from tests import forkserver

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"


# ``POKERALPH_FUZZ=deep``: the fuzz tests and Hypothesis try many times more cases (a
# nightly run; see the README's testing notes). The default run keeps every fuzzed
# method, framing and outcome, with fewer random cases each.
DEEP_FUZZ = os.environ.get("POKERALPH_FUZZ", "") == "deep"


class LazyModule:
    """A module imported at its first attribute: for a large library that only some
    tests of a module use. Every xdist worker collects every test module; a library
    imported at the top of one (the ACP SDK: ~0.45 s of CPU) is imported by each worker,
    whichever runs its tests. Annotations name the real module under ``TYPE_CHECKING``."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's probes of a module's names (fixture markers)
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


def fuzz_cases(default: int, deep: int) -> int:
    """How many random cases a fuzz test tries: ``deep`` under ``POKERALPH_FUZZ=deep``."""
    return deep if DEEP_FUZZ else default


def _test_tmp() -> str:
    """Where the tests' homes, repositories and sockets go: ``POKERALPH_TEST_TMP``, else
    /dev/shm where it is a writable memory file system with room, else /tmp. In memory,
    the daemon's fsyncs and git's many small files cost the disk nothing."""
    chosen = os.environ.get("POKERALPH_TEST_TMP")
    if chosen:
        return chosen
    shm = "/dev/shm"
    try:
        room = os.statvfs(shm)
        if os.access(shm, os.W_OK | os.X_OK) and room.f_bavail * room.f_frsize > 1 << 30:
            return shm
    except OSError:
        pass
    return "/tmp"


TEST_TMP = _test_tmp()


def short_tmpdir(prefix: str = "prx") -> Path:
    """A temp dir with a short path (AF_UNIX paths are limited to ~104 bytes), removed
    when this process exits if nothing removed it before (in memory, leftovers would
    hold RAM until the next boot)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=TEST_TMP))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


#: A shell that forks without pause from its first moment (six loops starting sleeps),
#: each loop saying so once it has started five.
FORK_STORM = (
    "for i in 1 2 3 4 5 6; do (n=0; while :; do sleep 60 & n=$((n + 1));"
    " if [ $n = 5 ]; then echo forked; fi; done) & done; wait"
)


def group_processes(group: int) -> list[tuple[int, str, int]]:
    """(pid, state letter, nice) of every process in process group ``group``, from /proc
    (zombies included: state ``Z``)."""
    found = []
    mine = str(group).encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if fields[2] == mine:
            found.append((int(entry.name), fields[0].decode(), int(fields[16])))
    return found


def hold_up_lowering(monkeypatch: Any, seconds: float) -> None:
    """Hold the daemon up for ``seconds`` between starting a run and lowering its
    priority, as a busy machine holds up its event loop now and then."""
    from pokeralphd import runpriority

    lower = runpriority.lower_priority

    def held_up(pid: int, nice: int, *, group: bool = True) -> None:
        time.sleep(seconds)
        lower(pid, nice, group=group)

    monkeypatch.setattr(runpriority, "lower_priority", held_up)


async def priority_escapes(
    start: Callable[[], Awaitable[Any]], nice: int, trials: int
) -> list[tuple[int, int]]:
    """Start a :data:`FORK_STORM` run ``trials`` times (``start``), let it fork (each of
    its loops five times at least), freeze its group (a stop signal keeps the group's
    members in it) and list the processes in it whose priority is not ``nice`` steps
    below ours."""
    from pokeralphd.proc import reap

    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice)
    escaped: list[tuple[int, int]] = []
    for _ in range(trials):
        process = await start()
        group = process.pid
        try:
            assert process.stdout is not None
            said = b""
            while said.count(b"forked\n") < 6:
                said += await process.stdout.receive()
            os.killpg(group, signal.SIGSTOP)
            escaped += [
                (p, theirs) for p, _, theirs in group_processes(group) if theirs != expected
            ]
        finally:
            os.killpg(group, signal.SIGKILL)
            await reap(process)
    return escaped


# A process holding a pid lock file's open file, as a child of a daemon killed between its
# fork and its exec holds it: it names the daemon (``pid``), whatever that is.
_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, (sys.argv[2] + "\\n").encode())
print("held", flush=True)
sys.stdin.readline()
"""


def lock_holder(lock: Path, pid: int) -> subprocess.Popen[str]:
    """A process holding ``lock`` (an ``flock``), the file naming ``pid``; it lets go
    with :func:`let_go`."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock), str(pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def let_go(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    holder.wait()
    holder.stdout.close()


def dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie has exited (its parent, or init, reaps it)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def reap(pids: list[int]) -> None:
    """SIGKILL whichever of ``pids`` still runs: a test's own cleanup, for when the daemon
    did not end them as the test expected."""
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def user_dirs(home: Path) -> dict[str, str]:
    """``$HOME`` and the XDG config and state folders under ``home``: where a program run
    by a test (the local agent installs its default rules into the user's config) keeps
    its files, not the real user's."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def local_agent_env(home: Path) -> dict[str, str]:
    """This environment, with :func:`user_dirs` under ``home`` and this checkout
    importable: to run ``python -m pokeralph_agent`` by hand."""
    return {**os.environ, **user_dirs(home), "PYTHONPATH": str(REPO_ROOT)}


def make_git_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repository at ``path`` with one commit of ``files`` (a README by default).

    Each set of files is committed once per test process, in a template, and copied:
    a fresh ``git init`` and commit cost five git processes per repository."""
    files = files or {"README.md": "# sample\n"}
    key = tuple(sorted(files.items()))
    template = _GIT_TEMPLATES.get(key)
    if template is None:
        template = _commit_template(short_tmpdir("prgit") / "repo", files)
        atexit.register(shutil.rmtree, template.parent, ignore_errors=True)
        _GIT_TEMPLATES[key] = template
    shutil.copytree(template, path, symlinks=True, dirs_exist_ok=True)
    return path


_GIT_TEMPLATES: dict[tuple[tuple[str, str], ...], Path] = {}


def _commit_template(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.email", "t@example.com"], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.name", "Test"], check=True)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "initial"], check=True)
    return path


def run_ctl(
    env: dict[str, str],
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``pokeralphctl ARGS`` with ``env`` in ``cwd``, ``input`` on its stdin.

    It runs in this process (``pokeralphctl.cli.main`` with a :class:`Terminal` of its
    own: ~80 ms of CPU less than a process, several hundred times a run), unless
    ``process`` asks for the real console script: for what only a process shows (its
    exit on a signal, a real pipe's end, its imports, a daemon it leaves running).
    In this process its output is encoded as on a pipe under a UTF-8 locale and decoded
    strictly, as ``text=True`` does: what a pipe refuses (a lone surrogate on stdout)
    fails here too, where a StringIO would take anything.
    """
    if process:
        return subprocess.run(
            [str(Path(sys.executable).with_name("pokeralphctl")), *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
        )
    from pokeralphctl.cli import main
    from pokeralphctl.terminal import Terminal

    # As Python sets up a pipe under a UTF-8 locale, but for stdout's surrogateescape:
    # the bytes it lets through are no UTF-8, which a test's decoding refuses anyway.
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    where = str(cwd) if cwd is not None else os.getcwd()
    term = Terminal(dict(env), where, io.StringIO(input or ""), stdout, stderr)
    code = main(list(args), term)
    out, err = (_written(stream) for stream in (stdout, stderr))
    return subprocess.CompletedProcess(["pokeralphctl", *args], code, out, err)


def _written(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


class DaemonProcess:
    """A real ``pokeralphd`` process: for what needs a process boundary (signals, kill -9,
    socket activation, a daemon's own start). Without the dashboard unless ``web``: loading
    the web stack is a third of a daemon's start (~0.25 s of CPU), and the dashboard's
    tests run it in-process.

    Forked from this test process's fork server (:mod:`tests.forkserver`: the imports
    done once) unless ``fork`` is false: then ``python -m pokeralphd`` is exec'd, as the
    benchmarks and the tests of the entry point itself need."""

    def __init__(
        self,
        home: Path,
        extra_args: list[str] | None = None,
        *,
        web: bool = False,
        fork: bool = True,
    ) -> None:
        self.home = home
        self.fork = fork and forkserver.available()
        self.socket = home / "run" / "d.sock"
        self.extra_args = (extra_args or []) + ([] if web else ["--no-web"])
        if "--sandbox" in self.extra_args:  # ours: the default is --no-sandbox (see inproc)
            self.extra_args.remove("--sandbox")
        else:
            self.extra_args.append("--no-sandbox")
        self.env = dict(os.environ)
        self.env.update(
            {
                "XDG_STATE_HOME": str(home / "state"),
                "XDG_CONFIG_HOME": str(home / "config"),
                "XDG_RUNTIME_DIR": str(home / "xdg-run"),
                "POKERALPH_SOCKET": str(self.socket),
                "PYTHONUNBUFFERED": "1",
                "POKERALPH_NO_AUTOSTART": "1",
            }
        )
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.pop("LISTEN_FDS", None)
        self.proc: subprocess.Popen[bytes] | forkserver.ForkedProcess | None = None
        self.log_path = home / "daemon.log"

    def start(self, wait: bool = True) -> DaemonProcess:
        return self._launch(["-m", "pokeralphd", *self.extra_args], wait)

    def _launch(self, args: list[str], wait: bool) -> DaemonProcess:
        """Run ``python ARGS`` (``-m pokeralphd ...`` or ``-c CODE ...``) as this daemon:
        exec'd, or forked, running what those two words name with ``ARGS[2:]`` as its
        arguments."""
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        if self.fork:
            code = args[1] if args[0] == "-c" else forkserver.DAEMON_MAIN
            self.proc = forkserver.ForkedProcess(
                code, ["pokeralphd", *args[2:]], self.env, str(self.log_path)
            )
        else:
            self.proc = subprocess.Popen(
                [sys.executable, *args],
                env=self.env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        atexit.register(self._kill_if_running)  # no test's daemon outlives the session
        if wait:
            try:
                wait_until(self._answers, 20, "the daemon to answer daemon.ping")
            except BaseException:
                self.kill9()  # never leave a daemon behind
                raise
        return self

    def _kill_if_running(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: it leads the group

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.logs()}")
        try:
            return bool(self.call("daemon.ping") == "pong")
        except (DaemonNotRunning, OSError):
            return False

    def running(self) -> bool:
        """Whether the daemon has been started and has not ended."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self, timeout: float | None = 30) -> Connection:
        return Connection(str(self.socket), timeout=timeout)

    def call(self, method: str, params: dict[str, Any] | list[Any] | None = None) -> Any:
        with self.connect() as conn:
            return conn.call(method, params)  # type: ignore[arg-type]

    def raw(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(str(self.socket))
        return sock

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        assert self.proc.returncode is not None
        return self.proc.returncode

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def ctl(
        self, *args: str, input: str | None = None, process: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """``pokeralphctl ARGS`` against this daemon (see :func:`run_ctl`)."""
        return run_ctl(self.env, *args, input=input, process=process)


# Bytes read past the last message, per socket (weak: they go with the socket).
_leftover: weakref.WeakKeyDictionary[socket.socket, bytes] = weakref.WeakKeyDictionary()


def read_messages(sock: socket.socket, count: int, timeout: float = 10) -> list[Any]:
    """Read ``count`` newline-delimited JSON messages from a raw socket (keeping the rest)."""
    sock.settimeout(timeout)
    buf = _leftover.pop(sock, b"")
    out: list[Any] = []
    while len(out) < count:
        while b"\n" not in buf:
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:  # say what came: the next failure shows its cause
                raise AssertionError(
                    f"no message {len(out) + 1} of {count} within {timeout:g} s; "
                    f"got {out!r}, then {buf[:200]!r}"
                ) from None
            if not chunk:
                raise AssertionError(f"connection closed after {len(out)} messages: {buf[:200]!r}")
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if line.strip():
            out.append(json.loads(line))
    if buf:
        _leftover[sock] = buf
    return out


def events_of(
    conn: Connection, until: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> Iterator[dict[str, Any]]:
    """Yield event params from a subscribed connection until ``until(params)`` is true.

    Every event is checked against its documented schema on the way (shared/schemas).
    """
    from pokeralphd.protocol.events import check_event

    conn.settimeout(timeout)
    for message in conn.messages():
        if message.get("method") == "event":
            params = message["params"]
            check_event(params)
            yield params
            if until(params):
                return


# --------------------------------------------------------------------- wire hardening
# A daemon with settings the command line has no flag for, optionally under a lowered
# RLIMIT_NOFILE; and an in-process connection for feeding bytes at bulk speed.

_SETTINGS_LAUNCHER = """
import json, resource, sys
settings, nofile = json.loads(sys.argv[1]), int(sys.argv[2])
if nofile:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
import anyio
from pokeralphd.daemon import Daemon
from pokeralphd.logsetup import setup_logging
from pokeralph_core.userdirs import Paths
from pokeralphd.settings import DaemonSettings
setup_logging("info", None)
settings = DaemonSettings.model_validate(settings)
anyio.run(Daemon(Paths.resolve(None), settings, own_process=True).run)
"""


class SettingsDaemon(DaemonProcess):
    """``DaemonProcess`` started with ``DaemonSettings`` (JSON names, e.g. ``maxBatch``) and,
    if ``nofile`` is given, that soft RLIMIT_NOFILE."""

    def __init__(
        self, home: Path, settings: dict[str, Any] | None = None, nofile: int | None = None
    ) -> None:
        super().__init__(home)
        self.settings = {"web": False, **(settings or {})}
        self.nofile = nofile or 0

    def start(self, wait: bool = True) -> SettingsDaemon:
        self._launch(["-c", _SETTINGS_LAUNCHER, json.dumps(self.settings), str(self.nofile)], wait)
        return self


def raw_request(method: str, rid: Any = 1, params: Any = None) -> bytes:
    """One newline-framed request."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def ping_within(daemon: DaemonProcess, seconds: float) -> float:
    """Ping on a fresh connection; fail unless "pong" comes within ``seconds``."""
    t0 = time.monotonic()
    with daemon.raw() as sock:
        sock.sendall(raw_request("daemon.ping", "liveness"))
        reply = read_messages(sock, 1, timeout=seconds)[0]
    elapsed = time.monotonic() - t0
    assert reply.get("result") == "pong", reply
    assert elapsed < seconds, f"ping took {elapsed:.2f}s"
    return elapsed


def blocking_question(daemon: Any, folder: str, timeout: float) -> dict[str, Any]:
    """A fresh repository under ``daemon.home`` with one blocking confirm delivery: the
    ``inbox.wait`` params that wait on it for ``timeout`` seconds (the bound tests and
    the attack benchmark pile waits on)."""
    repo = make_git_repo(daemon.home / folder)
    daemon.call("repo.register", {"path": str(repo)})
    delivery = daemon.call(
        "inbox.create",
        {"title": "Wait", "mode": "blocking", "schema": {"type": "confirm"}, "repo": str(repo)},
    )["delivery"]
    return {"id": delivery["id"], "timeout": timeout, "repo": str(repo)}


#: A feedback form with each kind of field (a required select, a number, a textarea, a
#: checkbox): the dashboard's and the terminal dashboard's form tests answer it.
BUG_FORM: dict[str, Any] = {
    "type": "form",
    "prompt": "File the bug",
    "fields": [
        {
            "name": "priority",
            "type": "select",
            "label": "Priority",
            "options": ["P0", "P1"],
            "required": True,
        },
        {"name": "hours", "type": "number", "label": "Estimate (hours)"},
        {"name": "details", "type": "textarea", "label": "Details"},
        {"name": "blocker", "type": "checkbox", "label": "Blocks a release"},
    ],
}


@functools.cache
def source_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a source file's syntax tree, in :func:`ast.walk`'s order, parsed once
    per test process: the architecture and contract tests read the whole package, each
    for its own question (parsing and walking was most of their ~1 s of CPU)."""
    return tuple(ast.walk(ast.parse(path.read_text())))
