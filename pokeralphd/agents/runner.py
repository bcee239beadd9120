"""Running an agent: start it (``proc.spawn``: its own process group, a run token), feed
the prompt on stdin and close it, stream stdout and stderr line by line (each line bounded,
see ``proc.iter_lines``), enforce the run timeout and the idle watchdog, and end the whole
process tree when it must stop (``proc.end_tree``). The token sweep also runs after a
normal exit, so an agent never leaves processes behind.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import subprocess
import time
import uuid
from typing import TYPE_CHECKING

import anyio

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentOutcome,
    AgentRateLimit,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentStderr,
    AgentText,
)
from pokeralphd.errors import AgentError
from pokeralphd.proc import end_tree, iter_lines, reap, spawn, sweep

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)
STDERR_TAIL = 12


async def run_agent(
    backend: AgentBackend,
    request: AgentRequest,
    on_event: Callable[[AgentEvent], None],
    on_raw: Callable[[bytes], None],
) -> AgentOutcome:
    """Run one agent to its end (or its timeout, idle stop, or cancellation)."""
    argv = backend.argv(request)
    token = uuid.uuid4().hex
    stdin_data = backend.stdin_bytes(request)
    started = time.monotonic()
    try:
        process = await spawn(
            argv,
            cwd=str(request.cwd),
            env={**request.config.env, **request.env},
            owner=request.owner,
            token=token,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise AgentError(
            f"the {backend.name} agent executable {argv[0]!r} was not found; {backend.missing_hint()}",
            command=argv[0],
        ) from exc
    except PermissionError as exc:
        raise AgentError(
            f"{argv[0]!r} is not executable (permission denied); fix its mode or set agent.command",
            command=argv[0],
        ) from exc
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:
            raise AgentError(
                f"{argv[0]!r} is not a program this system can run", command=argv[0]
            ) from exc
        raise AgentError(
            f"could not start {argv[0]!r}: {exc.strerror or exc}", command=argv[0]
        ) from exc

    clock = request.clock
    outcome = AgentOutcome(exit_code=None, reason="exited")
    stderr_tail: list[str] = []
    last_activity = [clock.monotonic()]
    on_event(
        AgentStarted(session_id=request.resume_session, model=request.config.model, pid=process.pid)
    )

    def handle(event: AgentEvent) -> None:
        if isinstance(event, AgentText):
            outcome.texts.append(event.text)
        elif isinstance(event, AgentResult):
            outcome.result = event
            outcome.session_id = event.session_id or outcome.session_id
        elif isinstance(event, AgentStarted):
            outcome.session_id = event.session_id or outcome.session_id
            event = AgentStarted(event.session_id, event.model, process.pid)
        elif isinstance(event, AgentRateLimit) and event.status == "rejected":
            outcome.rate_limited_until = event.resets_at or (clock.time() + 60)
        on_event(event)

    async def feed() -> None:
        if process.stdin is None:
            return
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            if stdin_data:
                await process.stdin.send(stdin_data)
        with contextlib.suppress(OSError, anyio.BrokenResourceError):
            await process.stdin.aclose()

    async def read_stdout() -> None:
        assert process.stdout is not None
        async for line in iter_lines(process.stdout):
            last_activity[0] = clock.monotonic()
            on_raw(line)
            if line.strip():
                for event in backend.parse_line(line):
                    handle(event)

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for line in iter_lines(process.stderr):
            last_activity[0] = clock.monotonic()
            on_raw(b"[stderr] " + line)
            text = line.decode("utf-8", errors="replace")
            stderr_tail.append(text)
            del stderr_tail[:-STDERR_TAIL]
            on_event(AgentStderr(text))

    async def watchdog(scope: anyio.CancelScope) -> None:
        if not request.idle_timeout:
            return
        while True:
            remaining = last_activity[0] + request.idle_timeout - clock.monotonic()
            if remaining <= 0:
                outcome.reason = "idle"
                scope.cancel()
                return
            await clock.sleep(remaining)

    async def run_timeout(scope: anyio.CancelScope) -> None:
        if not request.timeout:
            return
        await clock.sleep(request.timeout)
        if outcome.reason == "exited":
            outcome.reason = "timeout"
        scope.cancel()

    try:
        with anyio.CancelScope() as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watchdog, tg.cancel_scope)
                tg.start_soon(run_timeout, deadline)
                tg.start_soon(feed)
                drained = anyio.Event()

                async def read_all() -> None:
                    async with anyio.create_task_group() as io:
                        io.start_soon(read_stdout)
                        io.start_soon(read_stderr)
                    drained.set()

                tg.start_soon(read_all)
                outcome.exit_code = await process.wait()
                with anyio.move_on_after(2):
                    await drained.wait()
                if not drained.is_set():
                    # Something the agent started still holds its output open: end it.
                    await anyio.to_thread.run_sync(sweep, token)
                    with anyio.move_on_after(5):
                        await drained.wait()
                tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(end_tree, process.pid, token, request.kill_grace)
            await reap(process)
        raise
    if outcome.reason in ("timeout", "idle") or outcome.exit_code is None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(end_tree, process.pid, token, request.kill_grace)
            await reap(process)
        outcome.exit_code = process.returncode
        minutes = (request.timeout or 0) / 60
        outcome.error = (
            f"the agent ran past the {minutes:g}-minute iteration timeout and was stopped"
            if outcome.reason == "timeout"
            else f"the agent printed nothing for {request.idle_timeout:g} s and was stopped as stalled"
        )
    else:
        await anyio.to_thread.run_sync(sweep, token)
        await reap(process)
        outcome.error = _error_of(backend, outcome, stderr_tail)
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    return outcome


AUTH_WORDS = (
    "login",
    "log in",
    "api key",
    "apikey",
    "unauthorized",
    "authentication",
    "credit",
    "/login",
)


def _error_of(backend: AgentBackend, outcome: AgentOutcome, stderr_tail: list[str]) -> str | None:
    result = outcome.result
    if result is not None and result.is_error:
        text = (result.text or result.subtype or "error").strip()
        hint = ""
        if any(word in text.lower() for word in AUTH_WORDS):
            hint = f" (is {backend.name} logged in? run `{backend.default_command or backend.name}` once by hand to log in)"
        return f"the agent reported an error: {text[:500]}{hint}"
    if outcome.exit_code not in (0, None):
        tail = "\n".join(stderr_tail[-5:]).strip()
        code = outcome.exit_code
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with status {code}"
        )
        return f"the agent {how}" + (f": {tail[-800:]}" if tail else "")
    return None
