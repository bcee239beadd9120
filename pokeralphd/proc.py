"""Child processes: the one owner of every process the daemon starts.

- :func:`spawn` starts a command in its own process group, with the daemon's service
  variables removed from its environment, a per-run token (``POKERALPH_RUN_TOKEN``) and
  the owner's mark (``POKERALPH_OWNER``), which every descendant inherits. Every process
  of it runs ``nice`` steps below the daemon's priority from its first instant
  (:mod:`pokeralphd.runpriority`). On
  Linux its process group is the death watch's (:mod:`pokeralphd.deathwatch`) until it is
  reaped, so it dies with the daemon even after a ``kill -9`` (a run in bubblewrap needs
  none: bwrap's ``--die-with-parent`` does it, see :class:`Wrap`; where there are no
  pidfds, ``setpriv --pdeathsig KILL`` does it for the run's first process), and it is
  driven from its descriptors (:mod:`pokeralphd.childproc`).
- :func:`end_tree` ends a process group and every process carrying a run's token (so a
  grandchild that left the group with ``setsid`` is found too): SIGTERM, a grace period,
  then SIGKILL. :func:`end_run` kills what a run that exited normally left behind: the
  rest of its group, and whatever carries its token (:func:`after_exit`: nothing to do
  for a run in bubblewrap, whose pid namespace ended with it).
- Reading those two variables back, from one process or every one, is
  :mod:`pokeralphd.procenv`'s.
- :class:`ProcessOwner` marks the children of one daemon; at start the next daemon ends
  every process whose mark names a previous daemon of the same state folder that is no
  longer alive (:meth:`ProcessOwner.sweep_orphans`): agents, feedback loops and whatever
  they started.
- The owner bounds how many runs may be loading at once (its :class:`StartGate`, the
  daemon's ``startingRuns``): a hundred battles started together load a few at a time.
- The owner also knows the runs under way (:meth:`ProcessOwner.track`: which repository
  and task each run works for: an agent, a verifier or reviewer, a planning agent, a
  feedback loop running the agent's code) and tells who a connecting process is
  (:meth:`ProcessOwner.identify`): a person, or a process of one of its runs. A process is
  a run's when it carries the run's token, when one of its ancestors is the run's first
  process, or when it is in that process's group or session; a process with the owner's
  mark and no live run's token is ours too, with no scope at all, whether a run is under
  way or not. A peer that cannot be identified (no pid, gone before it was looked up, an
  environment we may not read) is never a person: it gets that narrowest scope too. To
  pass for a person a process would have to leave all of these at once (drop both
  variables, leave the group and session, and be re-parented): what the OS lets a
  same-user process do, so this narrows what an agent may ask by accident or by a
  careless prompt, and is no sandbox. Where the sandbox is on, a run's processes see
  neither the daemon's socket nor ``/proc`` of the host: they reach the daemon only
  through their run's own socket, whose scope is the run's by construction
  (:mod:`pokeralphd.server.runsocket`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import anyio
import psutil

from pokeralph_core.proctree import end_tree as end_group_tree
from pokeralph_core.proctree import wait_ended
from pokeralphd import childproc, deathwatch
from pokeralphd.procenv import OWNER_VAR, TOKEN_VAR, bound, marked, run_vars, token_processes
from pokeralphd.runpriority import RunPriority
from pokeralphd.startgate import StartGate

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from anyio.abc import Process

    from pokeralphd.runpriority import Hold

log = logging.getLogger(__name__)
# Variables a service manager gives the daemon; a child must not think they are its own.
SERVICE_VARS = (
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
)


RunKind = Literal["battle", "planning", "child"]


@dataclass(frozen=True, slots=True)
class AgentScope:
    """What a process the daemon started works for: a battle's run (its repository and
    task), a planning agent (its repository), or a child of ours with no live run
    (``child``: a left-behind process), which gets no repository. A peer nobody can
    identify gets the ``child`` scope too (``about`` says so)."""

    kind: RunKind
    repo: str | None = None
    task_id: str | None = None
    about: str | None = None  # what describe() says, when not what kind says

    def describe(self) -> str:
        if self.about is not None:
            return self.about
        if self.kind == "child":
            return "a process the daemon started"
        what = f"the {self.kind} agent of {self.repo}"
        return what + (f" (task {self.task_id})" if self.task_id else "")


CHILD_SCOPE = AgentScope("child")
#: A peer without a pid, gone before it was looked up, or whose environment we may not
#: read: nothing says it is a person, so it is not one.
UNKNOWN_SCOPE = AgentScope("child", about="a process pokeralphd cannot identify")


@dataclass(slots=True)
class TrackedRun:
    scope: AgentScope
    pid: int | None = None  # the run's first process, once started
    created: float | None = None  # its start time (a reused pid is not it)


MAX_RUNS = 4096  # runs tracked at once, at most (a leak must not grow without bound)


@dataclass(frozen=True)
class ProcessOwner:
    """The mark of one daemon process on its children: ``{scope}:{pid}:{start time}``.

    ``scope`` names the daemon's state folder, so daemons of other users or other test
    homes never touch each other's children.
    """

    scope: str
    pid: int
    started: float
    nice: int = 0  # how much lower its children's priority is than its own (run_nice)
    # runs starting up at once (startingRuns); None: no bound (tests' and tools' owners)
    start_gate: StartGate | None = field(default=None, compare=False)
    _runs: dict[str, TrackedRun] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_state_dir(
        cls, state_dir: object, nice: int = 0, starting: int | None = None
    ) -> ProcessOwner:
        """The daemon's owner: ``starting`` runs may be starting up at once (None: any)."""
        scope = hashlib.sha256(os.fsencode(str(state_dir))).hexdigest()[:16]
        gate = StartGate(starting) if starting is not None else None
        return cls(scope, os.getpid(), create_time(os.getpid()) or 0.0, nice, gate)

    @classmethod
    def anonymous(cls) -> ProcessOwner:
        """An owner whose children no start-up sweep will ever look for (tests, tools)."""
        return cls("anonymous-" + uuid.uuid4().hex[:8], os.getpid(), 0.0)

    @property
    def mark(self) -> str:
        return f"{self.scope}:{self.pid}:{self.started:.2f}"

    # -- runs under way
    @contextlib.contextmanager
    def track(self, token: str, scope: AgentScope) -> Iterator[TrackedRun]:
        """Know the run ``token`` as ``scope`` from before its first process starts
        (set ``pid`` on what this yields once it has) until it is over."""
        if len(self._runs) >= MAX_RUNS:
            raise RuntimeError(f"more than {MAX_RUNS} agent runs at once")
        run = self._runs[token] = TrackedRun(scope)
        try:
            yield run
        finally:
            self._runs.pop(token, None)

    def started_run(self, run: TrackedRun, pid: int) -> None:
        run.pid, run.created = pid, create_time(pid)

    @property
    def runs(self) -> int:
        return len(self._runs)

    def identify(self, pid: int | None) -> AgentScope | None:
        """Whose a connecting process ``pid`` is: None for a person, else the scope of
        the run it belongs to, :data:`CHILD_SCOPE` for a process with our mark and no
        live run, :data:`UNKNOWN_SCOPE` for a peer that cannot be identified (blocking:
        reads /proc).

        With no run under way it reads only the process's environment (~20 µs on Linux):
        a process with our mark is ours whatever the number of runs.
        """
        if pid is None:
            return UNKNOWN_SCOPE
        if pid == os.getpid():
            return None
        try:
            token, mark = run_vars(pid)
        except OSError:  # gone, or an environment we may not read
            return UNKNOWN_SCOPE
        run = self._runs.get(token or "")
        if run is not None:
            return run.scope
        if mark is not None and self.ours(mark):
            return CHILD_SCOPE
        return self._kin(pid) if self._runs else None

    def ours(self, mark: str) -> bool:
        """Whether ``mark`` is this daemon's, or a previous one's of the same state folder
        (whose leftovers the start-up sweep ends)."""
        return mark == self.mark or mark.startswith(self.scope + ":")

    def _kin(self, pid: int) -> AgentScope | None:
        """The scope of the run ``pid`` descends from or shares a group or session with;
        None if none (a person)."""
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return UNKNOWN_SCOPE
        roots = {r.pid: r for r in self._runs.values() if r.pid is not None}
        try:
            for parent in [proc, *proc.parents()]:
                root = roots.get(parent.pid)
                if root is not None and _same_process(parent, root.created):
                    return root.scope
        except psutil.Error:
            pass
        kin = _group_and_session(pid)
        if not kin:
            return UNKNOWN_SCOPE
        for group in kin:
            root = roots.get(group)
            if root is not None:
                return root.scope
        return None

    def sweep_orphans(self) -> int:
        """End every process a dead daemon of the same scope left behind (blocking).

        A process is an orphan when its mark has our scope but names another daemon that
        is no longer running (its pid is gone, or reused by a process started at another
        time). Returns how many processes were ended.
        """
        prefix = self.scope + ":"
        victims = bound(
            OWNER_VAR,
            (
                (pid, mark)
                for pid, mark in marked(OWNER_VAR)
                if mark.startswith(prefix) and mark != self.mark and not _owner_alive(mark)
            ),
        )
        if _kill_all(victims, wait=5):
            log.warning("ended %d process(es) a previous daemon left running", len(victims))
        return len(victims)


def _same_process(proc: psutil.Process, created: float | None) -> bool:
    try:
        return created is not None and abs(proc.create_time() - created) < 1
    except psutil.Error:
        return False


def _group_and_session(pid: int) -> tuple[int, ...]:
    try:
        return (os.getpgid(pid), os.getsid(pid))
    except OSError:
        return ()


def create_time(pid: int) -> float | None:
    """A process's start time, to tell a reused pid apart (None: it is gone)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def _owner_alive(mark: str) -> bool:
    try:
        _scope, pid_text, started_text = mark.rsplit(":", 2)
        pid, started = int(pid_text), float(started_text)
    except ValueError:
        return False
    created = create_time(pid)
    return created is not None and abs(created - started) < 1


def child_env(
    extra: Mapping[str, str], owner: ProcessOwner | None, token: str | None
) -> dict[str, str]:
    """The environment of a child: ours, less the service manager's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(extra)
    env.pop(OWNER_VAR, None)
    if owner is not None:
        env[OWNER_VAR] = owner.mark
    if token is not None:
        env[TOKEN_VAR] = token
    return env


_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


class Wrap(Protocol):
    """Where a run executes (the sandbox of :mod:`pokeralphd.sandbox`): ``argv`` as the
    command that runs it confined, and its environment.

    ``contains``: the wrapper dies with the daemon by itself and every process started
    inside ends with the run (bubblewrap: ``--die-with-parent`` and a pid namespace, whose
    processes the kernel kills when its first one ends, ``setsid`` or not). Such a run
    needs no death watch and leaves nothing to sweep after it exits."""

    @property
    def contains(self) -> bool: ...

    @property
    def holds(self) -> bool:
        """Whether ``wrap`` takes a :class:`Hold`: the wrapper says when it has made the
        run's first process, and holds it there, before it runs anything, until told."""
        ...

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str, hold: Hold | None = None
    ) -> tuple[list[str], dict[str, str]]: ...


def _with_death_signal(argv: Sequence[str]) -> list[str]:
    """``argv`` run so that the kernel kills it when the daemon dies (Linux, setpriv)."""
    if _SETPRIV is None:
        return list(argv)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]


async def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    owner: ProcessOwner | None,
    token: str | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.PIPE,
    confine: Wrap | None = None,
) -> Process:
    """Start ``argv`` in a new process group (raises OSError as ``open_process`` does).

    ``confine`` wraps the command (a sandbox) after its program is checked here, inside
    the new session (and ``nice``, unless it :attr:`~Wrap.holds` the command): the
    wrapper leads the run's process group, dies with the daemon (by itself where it
    :attr:`~Wrap.contains` the run, else by the death watch), and carries the run's
    token and the owner's mark.

    Where the owner has a start gate (:mod:`pokeralphd.startgate`: the daemon's), it
    first waits for a slot, held until the child first prints, ends, or the gate's
    settle time has passed.

    A cancel never leaves the child behind: starting is shielded (a cancel that landed
    while asyncio connected the pipes would kill the child but leave it unwaited, its
    transport unclosed), and a cancel that came meanwhile ends and reaps it before it
    goes on.
    """
    full_env = child_env(env, owner, token)
    check_program(argv, cwd, full_env.get("PATH"))
    priority = RunPriority(
        owner.nice if owner is not None else 0,
        holdable=confine is not None and confine.holds,
    )
    try:
        if confine is not None:
            argv, full_env = confine.wrap(argv, full_env, cwd, priority.hold)
        argv = priority.command(argv)
        watched = False  # a contained run dies with the daemon by itself
        if not contained(confine):
            watched = childproc.usable()  # childproc tells the watch of the reaping
            if not watched:
                argv = _with_death_signal(argv)
        process = await _start(argv, cwd, full_env, stdin, stderr, owner, priority, watched)
    except BaseException:
        priority.close()
        raise
    try:
        await anyio.lowlevel.checkpoint_if_cancelled()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            kill_group(process.pid)
            await reap(process)
        raise
    return process


async def _start(
    argv: Sequence[str],
    cwd: str,
    env: dict[str, str],
    stdin: int | None,
    stderr: int | None,
    owner: ProcessOwner | None,
    priority: RunPriority,
    watched: bool,
) -> Process:
    """Start the child (shielded: see :func:`spawn`) and put it below our priority
    (:meth:`RunPriority.apply`). A run ``watched`` is the death watch's from its start to
    its reaping (:mod:`.deathwatch`)."""
    gate = owner.start_gate if owner is not None else None
    starting = await gate.enter() if gate is not None else None
    try:
        with anyio.CancelScope(shield=True):
            if childproc.usable():  # Linux: the pipes and a pidfd straight on the loop
                process: Process = childproc.start(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    heard=starting.done if starting is not None else None,
                    pass_fds=priority.child_fds,
                    reaped=deathwatch.WATCH.forget if watched else None,
                )
                if watched:
                    deathwatch.WATCH.watch(process.pid)
                if starting is not None:
                    starting.settle()
            else:
                process = await anyio.open_process(
                    argv,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                    pass_fds=priority.child_fds,
                )
                if starting is not None:  # nothing here hears it load
                    starting.done()
            await priority.apply(process.pid)
    except BaseException:
        if starting is not None:
            starting.done()
        raise
    return process


def check_program(argv: Sequence[str], cwd: str, path: str | None) -> None:
    """Raise what ``exec`` would (FileNotFoundError, PermissionError) before we start:
    behind ``nice`` (or a sandbox) a missing program would only show as an exit status."""
    if not argv or not argv[0]:
        raise FileNotFoundError("empty command")
    program = argv[0]
    if os.sep in program:
        found = program if os.path.isabs(program) else os.path.join(cwd, program)
        if not os.path.exists(found):
            raise FileNotFoundError(program)
    else:
        which = shutil.which(program, mode=os.F_OK, path=path)
        if which is None:
            raise FileNotFoundError(program)
        found = which
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(program)


def end_tree(pid: int, token: str | None, grace: float) -> None:
    """End ``pid``'s group and every process carrying ``token`` (blocking: run in a thread);
    see :func:`pokeralph_core.proctree.end_tree`, which never reaps our own child."""
    end_group_tree(pid, grace, token_processes(token) if token else ())


@contextlib.contextmanager
def tracked(
    owner: ProcessOwner | None, scope: AgentScope | None, token: str
) -> Iterator[TrackedRun | None]:
    """:meth:`ProcessOwner.track` when there is an owner and a scope, else nothing."""
    if owner is None or scope is None:
        yield None
        return
    with owner.track(token, scope) as run:
        yield run


def contained(confine: Wrap | None) -> bool:
    """Whether a run under ``confine`` ends with all it started (see :class:`Wrap`)."""
    return confine is not None and confine.contains


async def after_exit(pid: int, token: str | None, confine: Wrap | None) -> None:
    """After a run's first process exited normally: :func:`end_run` in a worker thread,
    unless the run was :func:`contained` (then nothing it started is left: the scan of
    every process for its token is skipped)."""
    if not contained(confine):
        await anyio.to_thread.run_sync(end_run, pid, token)


def end_run(pid: int, token: str | None) -> int:
    """After a normal exit (blocking): kill what the run left in its process group, and
    every process carrying its token wherever it went; how many carried the token."""
    kill_group(pid)
    return sweep(token) if token else 0


def sweep(token: str) -> int:
    """After a normal exit: kill whatever the run left behind (same token)."""
    left = token_processes(token)
    if _kill_all(left, wait=2):
        log.info("ended %d process(es) a run left behind", len(left))
    return len(left)


def _kill_all(procs: list[psutil.Process], wait: float) -> int:
    """SIGKILL ``procs`` and wait (bounded) for them to go; how many there were."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if procs:
        wait_ended(procs, wait)
    return len(procs)


def kill_group(pid: int) -> None:
    """SIGKILL a finished child's process group (what it left in its group)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def end_recorded(pid: int, started: float | None) -> None:
    """End the group of a process recorded by a dead daemon, if it is still that process."""
    try:
        proc = psutil.Process(pid)
        if started and abs(proc.create_time() - started) > 1:
            return  # the pid was reused by something else
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    wait_ended(procs, 5)


async def reap(process: Process, timeout: float = 5) -> None:
    """Wait for a child we ended, and close its pipes (bounded)."""
    with anyio.move_on_after(timeout):
        await process.aclose()
