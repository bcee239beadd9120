"""Running an agent: start it (``proc.spawn``: its own process group, a run token), feed
the prompt on stdin and close it, stream stdout and stderr line by line (each line bounded,
see ``childlines.iter_lines``), enforce the run timeout and the idle watchdog, and end the whole
process tree when it must stop (``proc.end_tree``). After a normal exit its process group
is killed and its token swept (``proc.end_run``), so an agent never leaves processes
behind: neither one that dropped the token but stayed in the group, nor one that left
the group with the token.

A conversing backend (:meth:`~pokeralphd.agents.base.AgentBackend.conversation`: ACP)
gets every stdout line and the agent's stdin instead, talks with the agent while the
readers run, and is asked to stop (``session/cancel``) before a stopped agent's tree ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import re
import subprocess
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

import anyio

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentLines,
    AgentOutcome,
    AgentPermissionDecision,
    AgentPermissionRequest,
    AgentRateLimit,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentStderr,
    AgentText,
    ApiFailure,
    PermissionAnswer,
)
from pokeralphd.childlines import iter_line_blocks, iter_lines
from pokeralphd.errors import AgentError
from pokeralphd.proc import (
    after_exit,
    check_program,
    child_env,
    end_run,
    end_tree,
    reap,
    spawn,
    tracked,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from pokeralphd.proc import TrackedRun, Wrap

log = logging.getLogger(__name__)
#: Seconds a conversing agent gets to exit by itself once its turn is over and its stdin
#: closed, before its tree is ended (SIGTERM, then SIGKILL after the kill grace).
AFTER_TURN_GRACE = 0.5
STDERR_TAIL = 12


@dataclasses.dataclass(frozen=True, slots=True)
class _Channel:
    """A conversing backend's side of the run (:class:`~pokeralphd.agents.base.AgentChannel`)."""

    write: Callable[[bytes], Awaitable[None]]
    report: Callable[[AgentEvent], None]
    decide: Callable[[AgentPermissionRequest], Awaitable[PermissionAnswer]]

    async def send(self, data: bytes) -> None:
        await self.write(data)

    def emit(self, event: AgentEvent) -> None:
        self.report(event)

    async def ask(self, request: AgentPermissionRequest) -> PermissionAnswer:
        return await self.decide(request)


def start_error(backend: AgentBackend, program: str, exc: OSError) -> AgentError:
    """What ``exec`` failing on ``program`` means, with the fix."""
    if isinstance(exc, FileNotFoundError):
        return AgentError(
            f"the {backend.name} agent executable {program!r} was not found; {backend.missing_hint()}",
            command=program,
        )
    if isinstance(exc, PermissionError):
        return AgentError(
            f"{program!r} is not executable (permission denied); fix its mode or set agent.command",
            command=program,
        )
    if exc.errno == errno.ENOEXEC:
        return AgentError(f"{program!r} is not a program this system can run", command=program)
    return AgentError(f"could not start {program!r}: {exc.strerror or exc}", command=program)


def check_executable(backend: AgentBackend, request: AgentRequest) -> None:
    """Raise the AgentError a run would end with if the agent's program cannot be started
    (missing, not executable): resolved as ``proc.spawn`` resolves it, with the agent's
    own environment (its PATH included) and working directory."""
    argv = backend.argv(request)
    path = child_env(backend.environment(request), None, None).get("PATH")
    try:
        check_program(argv, str(request.cwd), path)
    except OSError as exc:
        raise start_error(backend, argv[0] if argv else "", exc) from exc


async def run_agent(
    backend: AgentBackend,
    request: AgentRequest,
    on_event: Callable[[AgentEvent], None],
    on_raw: Callable[[list[bytes]], None],
    *,
    confine: Wrap | None = None,
) -> AgentOutcome:
    """Run one agent to its end (or its timeout, idle stop, or cancellation).

    With an owner and a scope, the run is known to the owner from before its process
    starts until its last process is gone, so the daemon can tell the agent's own
    connections from a person's (``ProcessOwner.identify``). ``confine``: the run's
    sandbox (see ``proc.spawn``)."""
    token = uuid.uuid4().hex
    with tracked(request.owner, request.scope, token) as run:
        return await _run_agent(backend, request, on_event, on_raw, token, run, confine)


async def _run_agent(
    backend: AgentBackend,
    request: AgentRequest,
    on_event: Callable[[AgentEvent], None],
    on_raw: Callable[[list[bytes]], None],
    token: str,
    run: TrackedRun | None,
    confine: Wrap | None = None,
) -> AgentOutcome:
    argv = backend.argv(request)
    conversation = backend.conversation(request)
    stdin_data = b"" if conversation is not None else backend.stdin_bytes(request)
    started = time.monotonic()
    try:
        process = await spawn(
            argv,
            cwd=str(request.cwd),
            env=backend.environment(request),
            owner=request.owner,
            token=token,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            confine=confine,
        )
    except OSError as exc:
        raise start_error(backend, argv[0], exc) from exc
    if run is not None and request.owner is not None:
        request.owner.started_run(run, process.pid)

    clock = request.clock
    outcome = AgentOutcome(exit_code=None, reason="exited")
    stderr_tail: list[str] = []
    last_activity = [clock.monotonic()]
    # Routed permissions: the agent waits for our answers on its stdin, which stays open
    # until it printed its result. Time spent waiting for an answer (a person, maybe)
    # counts toward neither the idle watchdog nor the run timeout.
    routing = backend.routes_permissions(request)
    stdin_lock = anyio.Lock()
    asking = [0]  # answers under way
    waited = [0.0]  # seconds spent on finished ones
    wait_began = [0.0]  # when the answers now under way began
    group: list[TaskGroup] = []  # where answers run (set once the run's group exists)
    exited = anyio.Event()  # the agent's process ended
    talked = anyio.Event()  # a conversing backend's exchange is over
    lingered = [False]  # ended by us after its exchange was over (not a failure)
    on_event(
        AgentStarted(session_id=request.resume_session, model=request.config.model, pid=process.pid)
    )

    def handle(event: AgentEvent) -> None:
        if isinstance(event, AgentText):
            outcome.add_text(event.text)
        elif isinstance(event, AgentLines):
            outcome.add_texts(event.texts)
        elif isinstance(event, AgentResult):
            outcome.result = event
            outcome.session_id = event.session_id or outcome.session_id
        elif isinstance(event, AgentStarted):
            outcome.session_id = event.session_id or outcome.session_id
            event = AgentStarted(event.session_id, event.model, process.pid)
        elif isinstance(event, AgentRateLimit) and event.status == "rejected":
            outcome.rate_limited_until = event.resets_at or (clock.time() + 60)
        if routing and group:
            if isinstance(event, AgentPermissionRequest):
                group[0].start_soon(answer, event)
            elif isinstance(event, AgentResult):
                group[0].start_soon(close_stdin)
        on_event(event)

    async def decide(ask: AgentPermissionRequest) -> PermissionAnswer:
        assert request.permissions is not None
        if asking[0] == 0:
            wait_began[0] = clock.monotonic()
        asking[0] += 1
        try:
            try:
                reply = await request.permissions(ask)
            except Exception as exc:  # a bug deciding must not leave the agent hanging
                log.exception("deciding a permission request failed")
                reply = PermissionAnswer(False, f"pokeralph could not decide this call: {exc}")
            if reply.allow and reply.updated_input is None:
                reply = dataclasses.replace(reply, updated_input=ask.input)
            on_event(AgentPermissionDecision(ask, reply))
            return reply
        finally:
            asking[0] -= 1
            if asking[0] == 0:
                waited[0] += clock.monotonic() - wait_began[0]
            last_activity[0] = clock.monotonic()

    async def answer(ask: AgentPermissionRequest) -> None:
        reply = await decide(ask)
        await write_stdin(backend.permission_response(ask.request_id, reply))

    async def write_stdin(data: bytes) -> None:
        if process.stdin is None:
            return
        async with stdin_lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await process.stdin.send(data)

    async def close_stdin() -> None:
        if process.stdin is None:
            return
        async with stdin_lock:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await process.stdin.aclose()

    def waiting_for_answers() -> float:
        """Seconds the agent has spent waiting for our answers, so far."""
        return waited[0] + (clock.monotonic() - wait_began[0] if asking[0] else 0.0)

    async def feed() -> None:
        if conversation is not None:
            return
        if stdin_data:
            await write_stdin(stdin_data)
        if not routing:
            await close_stdin()

    channel = _Channel(write_stdin, handle, decide)

    async def talk() -> None:
        """The conversation, then the agent's end: stdin closed (an ACP agent exits at
        its end), and its tree ended when it outstays :data:`AFTER_TURN_GRACE`."""
        assert conversation is not None
        try:
            await conversation.converse(channel)
        finally:
            talked.set()
            await close_stdin()
        # The turn's result is in: nothing more is awaited of it. OpenCode and Qwen Code
        # stay 6-7 s after their stdin closes; waiting out the whole kill grace cost
        # every iteration 5 s.
        with anyio.move_on_after(min(AFTER_TURN_GRACE, request.kill_grace)):
            await exited.wait()
        if not exited.is_set():
            lingered[0] = True
            await anyio.to_thread.run_sync(end_tree, process.pid, token, request.kill_grace)

    async def stop_conversation() -> None:
        """Ask a conversing agent to stop (ACP's ``session/cancel``), close its stdin, and
        give it the grace to exit before its tree is ended."""
        if conversation is None:
            return
        with anyio.move_on_after(request.kill_grace):
            await conversation.stop(channel)
            await close_stdin()
            await process.wait()

    async def read_stdout() -> None:
        # a read at a time: a chatty agent's lines are handled together (a plain-text
        # agent's become one text), not one by one through every layer
        assert process.stdout is not None
        async for lines in iter_line_blocks(process.stdout):
            last_activity[0] = clock.monotonic()
            on_raw(lines)
            if conversation is not None:
                for line in lines:
                    conversation.receive(line)
            else:
                for event in backend.parse_lines(lines):
                    handle(event)
        if conversation is not None:
            conversation.closed()

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for line in iter_lines(process.stderr):
            last_activity[0] = clock.monotonic()
            on_raw([b"[stderr] " + line])
            text = line.decode("utf-8", errors="replace")
            stderr_tail.append(text)
            del stderr_tail[:-STDERR_TAIL]
            on_event(AgentStderr(text))

    async def watchdog(scope: anyio.CancelScope) -> None:
        if not request.idle_timeout:
            return
        while True:
            if asking[0]:
                last_activity[0] = clock.monotonic()  # waiting for us is not stalling
            remaining = last_activity[0] + request.idle_timeout - clock.monotonic()
            if remaining <= 0:
                outcome.reason = "idle"
                scope.cancel()
                return
            await clock.sleep(remaining)

    async def run_timeout(scope: anyio.CancelScope) -> None:
        if not request.timeout:
            return
        began = clock.monotonic()
        while True:
            remaining = began + request.timeout + waiting_for_answers() - clock.monotonic()
            if remaining <= 0:
                break
            await clock.sleep(remaining)
        if outcome.reason == "exited":
            outcome.reason = "timeout"
        scope.cancel()

    try:
        with anyio.CancelScope() as deadline:
            async with anyio.create_task_group() as tg:
                group.append(tg)
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
                if conversation is not None:
                    tg.start_soon(talk)
                outcome.exit_code = await process.wait()
                exited.set()
                with anyio.move_on_after(2):
                    await drained.wait()
                if not drained.is_set():
                    # Something the agent started still holds its output open: end it.
                    await anyio.to_thread.run_sync(end_run, process.pid, token)
                    with anyio.move_on_after(5):
                        await drained.wait()
                if conversation is not None:
                    with anyio.move_on_after(2):  # what it read last, to its result
                        await talked.wait()
                tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await stop_conversation()
            await anyio.to_thread.run_sync(end_tree, process.pid, token, request.kill_grace)
            await reap(process)
        raise
    if outcome.reason in ("timeout", "idle") or outcome.exit_code is None:
        with anyio.CancelScope(shield=True):
            await stop_conversation()
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
        await after_exit(process.pid, token, confine)
        await reap(process)
        # An agent ended by us after its exchange: its signal is ours, not its failure.
        judged = dataclasses.replace(outcome, exit_code=0) if lingered[0] else outcome
        outcome.error = _error_of(backend, judged, stderr_tail)
        if outcome.rate_limited_until is None:
            outcome.api_failure = classify_api_failure(outcome.result, stderr_tail, clock.time())
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
            hint = f" ({backend.auth_hint()})"
        return f"the agent reported an error: {text[:500]}{hint}"
    if outcome.exit_code not in (0, None):
        tail = _stderr_words(stderr_tail)
        code = outcome.exit_code
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with status {code}"
        )
        return f"the agent {how}" + (f": {tail}" if tail else "")
    return None


def _stderr_words(stderr_tail: list[str]) -> str:
    """What a failed agent said last on stderr, for a person: its last non-blank lines,
    led by its first ``error`` line when that fell out of them (a CLI's usage error puts
    the cause above a usage text: "error: unexpected argument '--x' found", then five
    lines of usage)."""
    lines = [line.rstrip() for line in stderr_tail if line.strip()]
    last = lines[-5:]
    cause = next((line for line in lines if line.lstrip().lower().startswith("error")), None)
    if cause is not None and cause not in last:
        last = [cause, *last[-4:]]
    return "\n".join(last).strip()[-800:]


# "API Error: 529 {...}", "API Error: Request rejected (429) · Rate limited…"
API_STATUS_IN_TEXT = re.compile(r"API Error:\D{0,40}?\b([45]\d\d)\b")
RATE_LIMIT_TYPES = {"rate_limit_error"}
OVERLOADED_TYPES = {"overloaded_error"}
SERVER_TYPES = {"api_error", "internal_server_error", "server_error"}


def classify_api_failure(
    result: AgentResult | None, stderr_tail: list[str], now: float
) -> ApiFailure | None:
    """A failed result that is the API's doing (429, 529, 5xx): transient, to be retried
    without counting the iteration. The structured fields a CLI prints win; the status in
    an "API Error: NNN" message is the fallback. Anything else (a 4xx such as a bad key, a
    failed turn) is the agent's failure, counted as usual."""
    if result is None or not result.is_error:
        return None
    message = (result.text or "").strip()
    status = result.api_error_status
    if status is None:
        found = API_STATUS_IN_TEXT.search(message)
        status = int(found.group(1)) if found else None
    kind_name = result.api_error_type or ""
    if status == 429 or kind_name in RATE_LIMIT_TYPES:
        text = "\n".join([message, *stderr_tail])
        return ApiFailure("rate_limit", status, message[:500], reset_from_text(text, now))
    if status == 529 or kind_name in OVERLOADED_TYPES:
        return ApiFailure("overloaded", status, message[:500])
    if (status is not None and 500 <= status <= 599) or kind_name in SERVER_TYPES:
        return ApiFailure("server", status, message[:500])
    return None


_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
RETRY_AFTER = re.compile(r"retry-after\W{0,3}(\d{1,6})\b", re.IGNORECASE)
TRY_IN = re.compile(
    r"(?:try again|retry|resets?)\s+in\s+(\d{1,6})\s*(s|sec|second|m|min|minute|h|hour)s?\b",
    re.IGNORECASE,
)
RESET_EPOCH = re.compile(
    r"(?:reset\w*|limit reached)\W{0,6}(?:at\W{0,3})?(\d{10})\b", re.IGNORECASE
)
RESET_ISO = re.compile(
    r"reset\w*\W{0,6}(?:at\W{0,3})?(\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d))",
    re.IGNORECASE,
)
MAX_RESET_AHEAD = 7 * 24 * 3600  # a "reset" further away than this is not believed


def reset_from_text(text: str, now: float) -> float | None:
    """The reset a rate-limit message or a printed header names, as epoch seconds: a
    ``retry-after`` (seconds), "try again in N minutes", an epoch (``…limit reached|EPOCH``,
    ``resetsAt: EPOCH``) or an RFC 3339 time (``anthropic-ratelimit-*-reset``). None when
    it names none, or one in the past or implausibly far away."""
    candidates: list[float] = []
    if found := RETRY_AFTER.search(text):
        candidates.append(now + int(found.group(1)))
    if found := TRY_IN.search(text):
        candidates.append(now + int(found.group(1)) * _UNITS[found.group(2).lower()])
    if found := RESET_EPOCH.search(text):
        candidates.append(float(found.group(1)))
    if found := RESET_ISO.search(text):
        with contextlib.suppress(ValueError):
            stamp = found.group(1).replace("Z", "+00:00")
            candidates.append(datetime.fromisoformat(stamp).timestamp())
    for when in candidates:
        if now < when <= now + MAX_RESET_AHEAD:
            return when
    return None
