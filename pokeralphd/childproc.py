"""A child process driven on the event loop by its file descriptors (Linux): its pipes
read and written without blocking, its end seen through a pidfd.

:func:`pokeralphd.proc.spawn` starts agents and feedback loops with it where the
platform has ``os.pidfd_open`` (Linux 5.3 and later), for speed: asyncio's subprocess
machinery connects each pipe through a transport and a protocol over several turns of
the loop, and waits for the child in a thread of its own (one per child); here the pipes
are plain non-blocking descriptors and the child's end is one more readable descriptor.
Starting a run this way costs about half a millisecond less, twice per iteration. The
pipes are read as asyncio's pipe transports read them (see :class:`_Reader`).

:class:`FdProcess` is an :class:`anyio.abc.Process`, as ``anyio.open_process`` returns:
the runner and the feedback loop use either the same way. It is the only waiter of its
child: nothing else reaps it (no child watcher knows it), so its pid cannot go to
another process before :meth:`FdProcess.wait` has reaped it, and signalling it before
then is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

AVAILABLE = hasattr(os, "pidfd_open")


@functools.cache
def _pidfds_work() -> bool:
    """The kernel opens pidfds (Linux 5.3+: Python may have the call on an older one)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def usable() -> bool:
    """Here, now: Linux's pidfds, under asyncio (whose loop reads the pipes)."""
    if not AVAILABLE or not _pidfds_work():
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True


class _Reader(ByteReceiveStream):
    """The read end of a child's pipe, read as asyncio's pipe transports read: the loop
    calls :meth:`_readable` when there is something, which reads it at once into a
    buffer; the descriptor stays registered (an agent printing a line every few
    milliseconds would otherwise cost two ``epoll_ctl`` calls per read) until the buffer
    holds :data:`LIMIT` bytes nobody took, or the end."""

    LIMIT = 1 << 18
    MAX_UNWAITED = 16

    def __init__(self, fd: int, heard: Callable[[], None] | None = None) -> None:
        self._fd: int | None = fd
        self._heard = heard  # told once, of the first bytes or the end
        self._buf = bytearray()
        self._eof = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False  # registered with the loop
        self._waiter: asyncio.Future[None] | None = None
        self._unwaited = 0  # reads in a row that found bytes here and did not wait

    def _readable(self) -> None:
        """(the loop's callback) Take what the pipe holds."""
        fd = self._fd
        if fd is None:
            return
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:  # the pipe broke: an end, as a read would see it
            data = b""
        if data:
            self._buf += data
        else:
            self._eof = True
        if self._heard is not None:
            heard, self._heard = self._heard, None
            heard()
        if self._eof or len(self._buf) >= self.LIMIT:
            self._stop_reading()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _stop_reading(self) -> None:
        if self._reading and self._loop is not None and self._fd is not None:
            self._loop.remove_reader(self._fd)
        self._reading = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """The next bytes. What it takes, it returns: every wait comes before the taking,
        so a cancel never loses bytes. Bytes already here are taken without a turn of
        the loop, :data:`MAX_UNWAITED` times in a row at most (then it lets the others run
        first): one turn per read, not two (the second was a tenth of the loop's time with
        a hundred agents printing)."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._buf and self._unwaited < self.MAX_UNWAITED:
            self._unwaited += 1
        else:
            if self._buf:
                await anyio.lowlevel.checkpoint()
            while not self._buf:
                if self._fd is None:
                    raise anyio.ClosedResourceError
                if self._eof:
                    raise anyio.EndOfStream
                if self._loop is None:
                    self._loop = asyncio.get_running_loop()
                if not self._reading:
                    self._loop.add_reader(self._fd, self._readable)
                    self._reading = True
                self._waiter = self._loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
            self._unwaited = 0
        data = bytes(self._buf[:max_bytes])
        del self._buf[:max_bytes]
        return data

    async def aclose(self) -> None:
        self._stop_reading()
        fd, self._fd = self._fd, None
        self._buf.clear()
        if fd is not None:
            os.close(fd)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        await anyio.lowlevel.checkpoint()


class _Writer(ByteSendStream):
    """The write end of a child's stdin."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            fd = self._fd
            if fd is None:
                raise anyio.ClosedResourceError
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            except BrokenPipeError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]
        await anyio.lowlevel.cancel_shielded_checkpoint()  # sent: not to be told cancelled

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        await anyio.lowlevel.checkpoint()


class FdProcess(Process):
    """A started child (see the module doc); :func:`start` makes one."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        stdin: _Writer | None,
        stdout: _Reader | None,
        stderr: _Reader | None,
        heard: Callable[[], None] | None = None,
        reaped: Callable[[int], None] | None = None,
    ) -> None:
        self._pid = pid
        self._heard = heard  # told once it has ended, if nothing was heard before
        self._reaped = reaped  # told its pid once reaped (in whatever thread reaps it)
        self._pidfd: int | None = pidfd
        self._returncode: int | None = None
        self._watching: anyio.Event | None = None  # set when the pidfd's watcher stops
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return self._stderr

    async def wait(self) -> int:
        """The exit status once the child ended (minus the signal that ended it). One
        waiter watches the pidfd; any other waits for it (and takes over if it is
        cancelled)."""
        while self._returncode is None:
            if self._watching is not None:
                await self._watching.wait()
                continue
            self._watching = watching = anyio.Event()
            try:
                assert self._pidfd is not None
                await anyio.wait_readable(self._pidfd)  # readable once the child ended
                self._reap()
            finally:
                self._watching = None
                watching.set()
        return self._returncode

    def _reap(self) -> None:
        """Take the child's status if it has ended (never blocks)."""
        if self._returncode is not None:
            return
        try:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: what it said is lost
            pid, status = self._pid, 255 << 8
        if pid == 0:
            return
        self._returncode = os.waitstatus_to_exitcode(status)
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            os.close(pidfd)
        if self._reaped is not None:
            reaped, self._reaped = self._reaped, None
            reaped(self._pid)
        if self._heard is not None:
            heard, self._heard = self._heard, None
            heard()

    def send_signal(self, value: signal.Signals) -> None:
        if self._returncode is None:  # unreaped: the pid is still our child's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, value)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def aclose(self) -> None:
        """Close the pipes and wait for the child (killed if this wait is cancelled)."""
        with anyio.CancelScope(shield=True):
            for stream in (self._stdin, self._stdout, self._stderr):
                if stream is not None:
                    await stream.aclose()
        try:
            await self.wait()
        except BaseException:
            self.kill()
            with anyio.CancelScope(shield=True):
                await self.wait()
            raise

    def __del__(self) -> None:
        # a child never waited for (a bug elsewhere): reaped if it has ended, so no
        # zombie is left; its descriptors are closed. Nobody is told it was heard: a
        # collection may run this in any thread, and the start gate's slot is the
        # event loop's (its settle timer gives the slot back)
        self._heard = None
        if self._returncode is None:
            with contextlib.suppress(OSError):
                self._reap()
        for stream in (self._stdin, self._stdout, self._stderr):
            fd = getattr(stream, "_fd", None)
            if fd is not None:
                if isinstance(stream, _Reader):
                    with contextlib.suppress(Exception):  # the loop may be gone
                        stream._stop_reading()
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)


def _pipe() -> tuple[int, int]:
    """A pipe closed on exec: (read end, write end)."""
    return os.pipe2(os.O_CLOEXEC)


def start(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: int | None,
    stdout: int | None,
    stderr: int | None,
    heard: Callable[[], None] | None = None,
    new_session: bool = True,
    pass_fds: Sequence[int] = (),
    reaped: Callable[[int], None] | None = None,
) -> FdProcess:
    """Start ``argv`` in a new session (unless not ``new_session``), as
    ``anyio.open_process`` with ``start_new_session`` would (``subprocess.PIPE``,
    ``DEVNULL``, ``STDOUT`` or None for each stream; raises OSError as it does). Blocking
    for as long as ``vfork`` and ``exec`` take, as asyncio's subprocess start is.

    ``heard`` is called when the child is first heard from: the first bytes read from
    its stdout or stderr, or their end, or its exit once reaped (it may be called more
    than once: once by each). ``pass_fds`` are left open in the child, as Popen's.
    ``reaped`` is given the child's pid once it has been reaped: the pid is free again."""
    ours: list[int] = []  # our ends: closed again if the start fails
    theirs: list[int] = []  # the child's ends: closed once it has them
    child: dict[str, int | None] = {}
    try:
        for name, how in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
            if how == subprocess.PIPE:
                read, write = _pipe()
                mine, its = (write, read) if name == "stdin" else (read, write)
                os.set_blocking(mine, False)
                ours.append(mine)
                theirs.append(its)
                child[name] = its
            elif how == subprocess.STDOUT and name == "stderr":
                child[name] = child["stdout"]
            else:
                child[name] = how
        popen = subprocess.Popen(
            list(argv),
            stdin=child["stdin"],
            stdout=child["stdout"],
            stderr=child["stderr"],
            cwd=cwd,
            env=dict(env),
            start_new_session=new_session,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        for fd in (*ours, *theirs):
            os.close(fd)
        raise
    for fd in theirs:
        os.close(fd)
    popen.returncode = 0  # ours to reap from here on: Popen must not wait or warn
    try:
        pidfd = os.pidfd_open(popen.pid)
    except OSError:  # cannot happen for an unreaped child of ours; end it, say why
        os.kill(popen.pid, signal.SIGKILL)
        os.waitpid(popen.pid, 0)
        for fd in ours:
            os.close(fd)
        raise
    fds = iter(ours)
    return FdProcess(
        popen.pid,
        pidfd,
        _Writer(next(fds)) if stdin == subprocess.PIPE else None,
        _Reader(next(fds), heard) if stdout == subprocess.PIPE else None,
        _Reader(next(fds), heard) if stderr == subprocess.PIPE else None,
        heard,
        reaped,
    )


async def run(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str], new_session: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """``argv`` to its end, as ``anyio.run_process(..., check=False)`` runs it: stdin
    ``/dev/null``, stdout and stderr read whole. Killed and reaped if this is cancelled (a
    timeout)."""
    process = start(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        new_session=new_session,
    )
    out, err = bytearray(), bytearray()

    async def drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
        if stream is not None:
            async for chunk in stream:
                into += chunk

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, process.stderr, err)
            await drain(process.stdout, out)
        code = await process.wait()
    except BaseException:
        process.kill()
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()
    return subprocess.CompletedProcess(list(argv), code, bytes(out), bytes(err))
