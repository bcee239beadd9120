"""A child driven by its descriptors (:mod:`pokeralphd.childproc`), against real processes:
its streams, its exit status, its reaping, and no descriptor left behind."""

from __future__ import annotations

import errno
import functools
import gc
import os
import signal
import subprocess

import anyio
import pytest

from pokeralphd import childproc
from pokeralphd.childlines import iter_lines
from pokeralphd.proc import spawn

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not childproc.AVAILABLE, reason="no pidfd here (Linux 5.3+)"),
]
PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT


def _start(script: str, stdin: int = DEVNULL, stderr: int = PIPE) -> childproc.FdProcess:
    return childproc.start(
        ["/bin/sh", "-c", script],
        cwd="/",
        env={"PATH": os.environ["PATH"]},
        stdin=stdin,
        stdout=PIPE,
        stderr=stderr,
    )


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


async def _read(stream: anyio.abc.ByteReceiveStream | None) -> list[bytes]:
    assert stream is not None
    return [line async for line in iter_lines(stream)]


async def test_streams_status_and_nothing_left_behind() -> None:
    before = _fds()
    process = _start("read x; echo out $x; echo err >&2; exit 3", stdin=PIPE)
    assert process.stdin is not None
    await process.stdin.send(b"hello\n")
    await process.stdin.aclose()
    out, err = await _read(process.stdout), await _read(process.stderr)
    assert (out, err) == ([b"out hello"], [b"err"])
    assert await process.wait() == 3 and process.returncode == 3
    await process.aclose()
    assert _reaped(process.pid)  # waited for: no zombie, and nobody else may reap it
    assert _fds() == before  # pipes and pidfd closed


async def test_stderr_into_stdout_and_a_new_session() -> None:
    process = _start("echo one; echo two >&2; ps -o sid= -p $$", stderr=STDOUT)
    lines = await _read(process.stdout)
    assert lines[:2] == [b"one", b"two"]
    assert int(lines[2]) == process.pid  # its own session, as start_new_session makes
    assert process.stderr is None
    assert await process.wait() == 0
    await process.aclose()


async def test_a_signal_is_a_negative_status_and_kill_after_reaping_is_harmless() -> None:
    process = _start("exec sleep 30")  # no shell left to outlive it
    process.send_signal(signal.SIGTERM)
    assert await process.wait() == -signal.SIGTERM
    process.kill()  # reaped: the pid may be another's now, so nothing is sent
    await process.aclose()


async def test_waiters_share_one_watch_and_one_may_be_cancelled() -> None:
    process = _start("read x", stdin=PIPE)
    results: list[int] = []
    async with anyio.create_task_group() as tg:

        async def waiter() -> None:
            results.append(await process.wait())

        with anyio.CancelScope() as cancelled:
            cancelled.cancel()
            await process.wait()  # cancelled at once: the next waiter takes over
        tg.start_soon(waiter)
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert process.stdin is not None
        await process.stdin.aclose()  # `read` sees the end of its input and exits 1
    assert results == [1, 1]
    await process.aclose()


async def test_writing_to_a_child_that_is_gone_is_a_broken_resource() -> None:
    process = _start("exit 0", stdin=PIPE)
    await process.wait()
    assert process.stdin is not None
    with pytest.raises(anyio.BrokenResourceError):
        await process.stdin.send(b"x" * (1 << 20))
    await process.aclose()


async def test_a_missing_program_raises_and_leaks_nothing() -> None:
    before = _fds()
    with pytest.raises(FileNotFoundError):
        childproc.start(
            ["/nonexistent/program"], cwd="/", env={}, stdin=PIPE, stdout=PIPE, stderr=PIPE
        )
    assert _fds() == before


async def test_aclose_cancelled_kills_the_child() -> None:
    process = _start("exec sleep 30")  # no shell left to outlive it
    with anyio.move_on_after(0.05):  # aclose waits for the child, which will not end
        await process.aclose()
    assert process.returncode == -signal.SIGKILL
    assert _reaped(process.pid)


async def test_a_large_output_arrives_whole() -> None:
    process = _start("head -c 3000000 /dev/zero | tr '\\0' 'a'; echo")
    assert process.stdout is not None
    total = 0
    while True:
        try:
            total += len(await process.stdout.receive())
        except anyio.EndOfStream:
            break
    assert total == 3_000_001
    assert await process.wait() == 0
    await process.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        await process.stdout.receive()


async def test_a_kernel_without_pidfds_starts_runs_the_asyncio_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python may have ``pidfd_open`` on a kernel older than 5.3, which refuses it: then
    ``spawn`` starts runs as asyncio does, not this module's way."""

    def refused(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused)
    monkeypatch.setattr(
        childproc, "_pidfds_work", functools.cache(childproc._pidfds_work.__wrapped__)
    )
    assert not childproc.usable()
    process = await spawn(["/bin/sh", "-c", "echo hi"], cwd="/", env={}, owner=None)
    assert not isinstance(process, childproc.FdProcess)
    assert await _read(process.stdout) == [b"hi"]
    assert await process.wait() == 0
    await process.aclose()


async def test_a_cancelled_receive_takes_nothing() -> None:
    process = _start("echo one; echo two")
    assert process.stdout is not None
    assert await process.wait() == 0
    assert await process.stdout.receive(2) == b"on"  # the rest waits in the buffer
    with anyio.CancelScope() as scope:
        scope.cancel()
        await process.stdout.receive()  # cancelled before it takes anything
    assert scope.cancelled_caught
    assert await _read(process.stdout) == [b"e", b"two"]
    await process.aclose()


async def test_bytes_already_read_are_taken_without_a_turn_of_the_loop_a_few_times() -> None:
    """A receive that finds bytes waiting takes them at once (one turn of the loop per
    read, not two), but not forever: every MAX_UNWAITED such reads, the others run."""
    process = _start("printf '%0100d' 0")
    assert process.stdout is not None
    assert await process.wait() == 0
    assert await process.stdout.receive(1) == b"0"  # waited for the loop to read them
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(count_turns)
        await anyio.lowlevel.checkpoint()
        start = turns
        taken = b"".join([await process.stdout.receive(1) for _ in range(99)])
        tg.cancel_scope.cancel()
    assert taken == b"0" * 99
    limit = childproc._Reader.MAX_UNWAITED
    assert 99 // (limit + 1) <= turns - start <= 99 // limit + 1
    await process.aclose()


async def test_heard_is_told_of_the_first_bytes_or_the_end_and_never_by_a_collection() -> None:
    """``heard``: called when the child is first heard from (its first bytes, the end of
    its output, its exit once reaped). A child collected without being waited for tells
    no one: a collection may run in any thread."""
    told: list[str] = []
    process = childproc.start(
        ["/bin/sh", "-c", "read line; echo $line"],
        cwd="/",
        env={"PATH": os.environ["PATH"]},
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
        heard=lambda: told.append("heard"),
    )
    assert process.stdin is not None and process.stdout is not None
    await process.stdin.send(b"hi\n")
    assert await process.stdout.receive() == b"hi\n"
    assert told == ["heard"]
    assert await process.wait() == 0
    await process.aclose()
    assert told == ["heard", "heard"]  # the end, once by each (the gate's is idempotent)

    quiet: list[str] = []
    unwaited = childproc.start(
        ["/bin/sh", "-c", "exit 0"],
        cwd="/",
        env={},
        stdin=DEVNULL,
        stdout=PIPE,
        stderr=PIPE,
        heard=lambda: quiet.append("heard"),
    )
    os.waitid(os.P_PID, unwaited.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped
    del unwaited
    gc.collect()
    assert quiet == []


async def test_run_gives_the_status_and_both_streams_whole() -> None:
    """:func:`childproc.run`, as ``anyio.run_process(check=False)``: past a pipe's buffer
    on both streams at once, the exit status, and the session it was asked for."""
    script = "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2; ps -o sid= -p $$ >&2; exit 3"
    done = await childproc.run(
        ["/bin/sh", "-c", script], cwd="/", env={"PATH": os.environ["PATH"]}, new_session=False
    )
    assert done.returncode == 3
    assert done.stdout == b"\0" * 300_000
    assert done.stderr[:200_000] == b"\0" * 200_000
    assert int(done.stderr[200_000:]) == os.getsid(0)
