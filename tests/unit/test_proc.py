"""proc: bounded line reading, and the start-up sweep of a dead daemon's children."""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from anyio.abc import Process
from hypothesis import given, settings
from hypothesis import strategies as st

from pokeralphd import childproc
from pokeralphd.childlines import iter_line_blocks, iter_lines
from pokeralphd.proc import ProcessOwner, kill_group, spawn
from pokeralphd.procenv import OWNER_VAR, TOKEN_VAR, marked
from tests.helpers import FORK_STORM, hold_up_lowering, priority_escapes, wait_until

pytestmark = pytest.mark.anyio

# The children these tests end, mark and look for: any program does, and sleep(1) starts
# in a millisecond of CPU where Python takes thirty.
SLEEP = shutil.which("sleep") or "/bin/sleep"


async def test_an_endless_line_comes_in_bounded_pieces() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](100)

    class Bytes:
        async def receive(self, max_bytes: int = 65536) -> bytes:
            return await receive.receive()

    async def produce() -> None:
        async with send:
            for _ in range(40):
                await send.send(b"x" * 50_000)  # 2 MB without a newline
            await send.send(b"y\nshort\n")

    pieces: list[bytes] = []
    async with receive, anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async for line in iter_lines(Bytes(), max_line=1 << 18):  # type: ignore[arg-type]
            pieces.append(line)
    assert max(map(len, pieces)) <= 1 << 18
    assert b"".join(pieces[:-1]) == b"x" * 2_000_000 + b"y"
    assert pieces[-1] == b"short"


def _lines_one_by_one(reads: list[bytes], max_line: int) -> list[bytes]:
    """What a child's output means, read by read: the reference the blocks must match."""
    out: list[bytes] = []
    buf = b""
    for read in reads:
        buf += read
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            out.extend(line[at : at + max_line] for at in range(0, max(len(line), 1), max_line))
        while len(buf) > max_line:
            out.append(buf[:max_line])
            buf = buf[max_line:]
    if buf:
        out.append(buf)
    return out


class _Reads:
    def __init__(self, reads: list[bytes]) -> None:
        self.reads = list(reads)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.reads:
            raise anyio.EndOfStream
        return self.reads.pop(0)


@settings(max_examples=300, deadline=None)
@given(
    reads=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"\n")), max_size=12),
    max_line=st.integers(1, 12),
)
def test_blocks_of_lines_are_the_lines_read_by_read(reads: list[bytes], max_line: int) -> None:
    blocks: list[list[bytes]] = []

    async def read() -> None:
        async for lines in iter_line_blocks(_Reads(reads), max_line):  # type: ignore[arg-type]
            assert lines, "an empty block"
            blocks.append(lines)

    anyio.run(read)
    assert [line for block in blocks for line in block] == _lines_one_by_one(reads, max_line)
    assert len(blocks) <= len(reads) + 1  # a block per read at most (and the rest at the end)


def _marked_sleeper(mark: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **{OWNER_VAR: mark})
    return subprocess.Popen([SLEEP, "120"], env=env, start_new_session=True)


def test_the_sweep_ends_children_of_a_dead_daemon_and_spares_the_rest() -> None:
    owner = ProcessOwner("scope-test-" + str(os.getpid()), os.getpid(), 0.0)
    dead = _marked_sleeper(f"{owner.scope}:999999999:12.00")  # a daemon that is gone
    alive = _marked_sleeper(f"{owner.scope}:{os.getpid()}:{psutil.Process().create_time():.2f}")
    other = _marked_sleeper("another-scope:999999999:12.00")
    try:
        wait_until(
            lambda: all(
                psutil.Process(p.pid).environ().get(OWNER_VAR) for p in (dead, alive, other)
            ),
            10,
            "the children to start",
        )
        assert owner.sweep_orphans() == 1
        assert dead.wait(timeout=10) is not None
        assert alive.poll() is None and other.poll() is None
    finally:
        for proc in (dead, alive, other):
            proc.kill()
            proc.wait()


async def test_spawn_marks_the_child_and_strips_service_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/x")
    owner = ProcessOwner.anonymous()
    process = await spawn(
        ["/bin/sh", "-c", 'echo "${POKERALPH_OWNER-None} ${NOTIFY_SOCKET-None}"'],
        cwd="/",
        env={},
        owner=owner,
    )
    assert process.stdout is not None
    out = b"".join([line async for line in iter_lines(process.stdout)])
    await process.wait()
    await process.aclose()
    assert out.decode() == f"{owner.mark} None"


async def test_a_runs_processes_run_below_the_daemon(tmp_path: Path) -> None:
    """run_nice: the run's first process, what it starts (a child forked at once, before
    the daemon lowered the group, included) and, on Linux, its session's autogroup."""
    owner = dataclasses.replace(ProcessOwner.anonymous(), nice=7)
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    script = "sleep 30 & echo $!; wait"  # the shell forks its child straight away
    process = await spawn(["/bin/sh", "-c", script], cwd="/", env={}, owner=owner)
    try:
        assert process.stdout is not None
        child = int((await process.stdout.receive()).split()[0])
        expected = min(19, ours + 7)
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == expected
        assert psutil.Process(child).nice() == expected
        group = Path(f"/proc/{process.pid}/autogroup")
        if group.exists():
            assert group.read_text().split()[-1] == str(expected)
            assert Path("/proc/self/autogroup").read_text() != group.read_text()
    finally:
        kill_group(process.pid)
        await process.wait()
        await process.aclose()


async def test_an_unconfined_run_forking_at_once_runs_below_the_daemon_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unconfined (nothing holds the command), a run starts through ``nice -n``, so every
    process of it inherits the lower priority from its first instant. Lowered by a walk
    of its group once it ran, a child whose fork was under way during the walk kept the
    daemon's priority: with the daemon held up 30 ms after the start, as a busy machine
    holds it up, the storm's sleeps escaped in every run of this test before the fix."""
    hold_up_lowering(monkeypatch, 0.03)
    owner = dataclasses.replace(ProcessOwner.anonymous(), nice=7)

    async def start() -> Process:
        return await spawn(["/bin/sh", "-c", FORK_STORM], cwd="/", env={}, owner=owner)

    assert await priority_escapes(start, nice=7, trials=10) == []


async def test_spawn_says_what_exec_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await spawn(["no-such-program-here"], cwd="/", env={}, owner=None)
    with pytest.raises(FileNotFoundError):
        await spawn(["./missing"], cwd=str(tmp_path), env={}, owner=None)
    plain = tmp_path / "plain.txt"
    plain.write_text("not a program")
    plain.chmod(0o644)
    with pytest.raises(PermissionError):
        await spawn([str(plain)], cwd="/", env={}, owner=None)


async def test_ending_a_tree_leaves_our_childs_exit_status_to_the_event_loop() -> None:
    """end_tree must not reap our own child: the event loop's watcher would then report
    255 instead of the signal, and a waiter could fail. The race is lost now and then
    (4 in 30 before the fix), so it is run 20 times."""
    from pokeralphd.proc import end_tree

    for _ in range(20):
        process = await spawn(
            [SLEEP, "60"],
            cwd=".",
            env={},
            owner=ProcessOwner.anonymous(),
            token="tok-" + os.urandom(8).hex(),
        )
        await anyio.to_thread.run_sync(end_tree, process.pid, None, 5.0)
        assert await process.wait() == -15
        await process.aclose()


@pytest.mark.parametrize("platform", ["linux", "other"])
def test_marked_finds_the_variable_only_as_a_whole_entry(
    platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``marked`` reads /proc as bytes on Linux and asks psutil elsewhere: both find a
    process by the variable's own entry, never by a name that ends with it or a value
    that holds it."""
    var = f"PRX_MARK_{os.getpid()}"
    env = dict(os.environ)
    children = [
        subprocess.Popen([SLEEP, "60"], env={**env, **extra})
        for extra in (
            {var: "one é"},
            {"X" + var: "no", "OTHER": f"{var}=no"},
            {var: ""},
        )
    ]
    # the variable as the very first entry, and a false match before the real entry
    children += [
        subprocess.Popen([SLEEP, "60"], env=first)
        for first in ({var: "first", **env}, {"A_FIRST": f"x{var}=no", **env, var: "last"})
    ]
    if platform == "other":
        monkeypatch.setattr(sys, "platform", "darwin")
    try:
        # Popen returns once the child execs, but a vfork'd parent resumes while the kernel
        # still builds the new program's environment: wait until every one is readable.
        wait_until(
            lambda: all(psutil.Process(c.pid).environ() for c in children),
            10,
            "the children to start",
        )
        found = {pid: value for pid, value in marked(var)}
        assert found == {
            children[0].pid: "one é",
            children[2].pid: "",
            children[3].pid: "first",
            children[4].pid: "last",
        }
    finally:
        for child in children:
            child.kill()
            child.wait()


@pytest.mark.parametrize("way", ["pidfd", "asyncio"])
async def test_a_spawn_cancelled_as_it_starts_leaves_no_child_behind(
    monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """A cancel that lands while the child is being started (a battle cancelled as its
    iteration begins) ends and reaps that child: none is left running or unwaited. (In
    asyncio the child exists before its pipes are connected; a cancel then killed it but
    left it unwaited, and its Popen warned "still running" when collected, failing
    whichever test ran then: ~2 starts in 300 cancelled at random points.) Here the
    cancel always lands after the child exists, whichever way it was started
    (:mod:`pokeralphd.childproc` where there are pidfds, else asyncio's)."""
    scope = anyio.CancelScope()
    if way == "pidfd":
        if not childproc.usable():
            pytest.skip("no pidfd here")
        real_start = childproc.start

        def start_then_cancelled(*args: Any, **kwargs: Any) -> Any:
            process = real_start(*args, **kwargs)
            scope.cancel()  # the cancel comes now: the child exists
            return process

        monkeypatch.setattr(childproc, "start", start_then_cancelled)
    else:
        real_open = anyio.open_process

        async def open_then_cancelled(*args: Any, **kwargs: Any) -> Any:
            process = await real_open(*args, **kwargs)
            scope.cancel()  # the cancel comes now: the child exists
            await anyio.lowlevel.checkpoint()
            return process

        monkeypatch.setattr(childproc, "AVAILABLE", False)
        monkeypatch.setattr(anyio, "open_process", open_then_cancelled)
    token = "tok-" + os.urandom(8).hex()
    with scope:
        await spawn([SLEEP, "60"], cwd=".", env={}, owner=None, token=token)
    assert scope.cancelled_caught
    gc.collect()  # an unwaited child's Popen warns here (the warning fails the test)
    assert [pid for pid, value in marked(TOKEN_VAR) if value == token] == []
