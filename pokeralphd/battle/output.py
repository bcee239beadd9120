"""Streaming an iteration's output: the log file and coalesced ``iteration_output`` events.

Every raw line goes to ``logs/iteration-{n}.log`` (written on each tick); every
parsed agent event becomes a chunk. Chunks are published together at most once per
coalescing window, so a chatty agent costs one event per window, not one per line, while
a quiet agent's line still reaches subscribers within the window.

Every stream flushes on the same ticks: the window's boundaries on the event loop's
clock (``k * window``), not ``window`` after its own first chunk. So a hundred battles'
streams publish in one pass of the loop, and each subscriber's writer wakes once per
tick and sends one write for all of them, rather than once per battle per window (a
send per battle per window per subscriber was the largest cost under many battles).
A chunk waits at most one window, as before.

What one window may publish is bounded (chunks and characters); past that, chunks are
dropped and counted, and the event says so (``[N chunks coalesced away; see the log]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
from typing import IO, TYPE_CHECKING

import anyio

from pokeralph_core import safefs
from pokeralphd.agents.base import (
    AgentEvent,
    AgentLines,
    AgentNotice,
    AgentPermissionDecision,
    AgentPermissionDenied,
    AgentPermissionRequest,
    AgentRateLimit,
    AgentStderr,
    AgentText,
    AgentToolResult,
    AgentToolUse,
)
from pokeralphd.agents.claude import tool_summary
from pokeralphd.errors import StorageError
from pokeralphd.protocol.events import Chunk

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from pokeralphd.protocol.events import ChunkKind

log = logging.getLogger(__name__)

MAX_CHUNK_TEXT = 16 * 1024
# The kernel's word for a write to a read-only mount (the sandbox's), as shells and
# runtimes print it.
READ_ONLY = re.compile(r"read-only file system|EROFS", re.IGNORECASE)
MAX_REFUSALS = 20
MAX_PENDING_CHUNKS = 500
LOG_BUFFER = 64 << 10  # log bytes held before a write, if the tick comes later
# Seconds between two writes of the log, at least, while the lines come (its last lines
# are written when the run ends). One write per stream per tick was 7% of the event
# loop's time with a hundred agents printing: a tenth of it now.
LOG_INTERVAL = 0.1
# An event's text at most (each chunk up to MAX_CHUNK_TEXT): 500 chunks of 16 KiB made an
# 8 MiB event, a subscriber's whole backlog (``maxSubscriberBacklog``) in one go.
MAX_PENDING_CHARS = 512 * 1024


def loop_clock() -> Callable[[], float]:
    """The running asyncio loop's own clock, the one ``anyio.current_time`` reads: asked
    directly, as anyio first asks which library runs (0.8 µs a call, against 0.06), and
    a stream reads the clock for every window with output."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # no asyncio loop here: anyio knows which clock
        return anyio.current_time


def next_tick(now: float, window: float) -> float:
    """The first boundary of ``window`` after ``now``: the moment every stream with that
    window flushes (timers due at one moment fire in one pass of the event loop)."""
    return (math.floor(now / window) + 1) * window


class OutputStream:
    def __init__(
        self,
        log_path: Path,
        publish: Callable[[list[Chunk]], None],
        window_ms: int,
        *,
        now: Callable[[], float] | None = None,
        sleep_until: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.log_path = log_path
        self._publish = publish
        self._window = window_ms / 1000
        # the event loop's clock (tests pass a fake one, and how to sleep on it)
        self._now = now or loop_clock()
        self._sleep_until = sleep_until or self._sleep_on_clock
        self._chunks: list[Chunk] = []
        self._pending_chars = 0  # their texts' length
        self._dropped = 0
        self._wake = anyio.Event()  # set from the first chunk after a flush until the next
        self._due = 0.0  # when what is pending is published
        self._file: IO[bytes] | None = None
        self._log_lines: list[bytes] = []  # the log's lines not written yet
        self._log_bytes = 0
        self._log_due = 0.0  # the log is written at the first flush from then on
        self._log_timer: asyncio.TimerHandle | None = None  # writes it then, if no flush does
        self.last_text = ""
        self.log_error: str | None = None
        # Set while the run is confined by the sandbox: a write the sandbox refused is
        # said once in the log as a [pokeralph] line, with how to allow it.
        self.confined = False
        self._refusals: set[str] = set()

    def open(self) -> None:
        """Open the log for appending, never through a link planted under ``.pokeralph/``.

        A refused or failed open is reported in ``log_error``; the battle goes on unlogged.
        """
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = safefs.open_file(self.log_path, flags, 0o644, create_dirs=True)
        except StorageError as exc:
            self.log_error = f"cannot write {self.log_path}: {exc.message}"
            log.error("%s", self.log_error)
            return
        except OSError as exc:
            self.log_error = f"cannot write {self.log_path}: {exc.strerror}"
            log.error("%s", self.log_error)
            return
        self._file = os.fdopen(fd, "ab")

    def raw_lines(self, lines: list[bytes]) -> None:
        """The lines of one read of the agent's output, for the log (as :meth:`raw`)."""
        if self._file is not None:
            self._log_lines.extend(lines)
            self._log_bytes += sum(map(len, lines))
            if self._log_bytes > LOG_BUFFER:
                self._write_log()

    def raw(self, line: bytes) -> None:
        """A line for the log: kept and written with the others of its window (one
        write a tick, not one call a line), sooner past LOG_BUFFER bytes."""
        if self._file is not None:
            if line.endswith(b"\n"):
                line = line[:-1]
            self._log_lines.append(line)
            self._log_bytes += len(line)
            if self._log_bytes > LOG_BUFFER:
                self._write_log()

    def _write_log(self) -> None:
        lines, self._log_lines, self._log_bytes = self._log_lines, [], 0
        if self._file is None or not lines:
            return
        lines.append(b"")
        try:
            self._file.write(b"\n".join(lines))
            self._file.flush()
        except OSError as exc:  # disk full: keep the battle going, say so once
            self.log_error = f"log write failed: {exc.strerror}"
            self._file = None

    def chunk(self, kind: ChunkKind, text: str) -> None:
        if not text:
            return
        if kind == "text":
            self.last_text = text[-500:]
        if len(text) > MAX_CHUNK_TEXT:
            text = text[:MAX_CHUNK_TEXT] + f"\n[… {len(text) - MAX_CHUNK_TEXT} chars in the log]"
        size = self._pending_chars + len(text)
        if len(self._chunks) >= MAX_PENDING_CHUNKS or size > MAX_PENDING_CHARS:
            self._dropped += 1
        else:
            self._pending_chars = size
            self._chunks.append(Chunk(kind, text))
        if not self._wake.is_set():  # the first since the last flush: due at the next tick
            self._due = next_tick(self._now(), self._window) if self._window else 0.0
            self._wake.set()

    def lines(self, texts: list[str]) -> None:
        """Lines of the agent's words shown together: one chunk of them (several if they
        pass :data:`MAX_CHUNK_TEXT` characters; a line that long is cut as any text is)."""
        piece: list[str] = []
        size = 0
        for text in texts:
            if piece and size + len(text) > MAX_CHUNK_TEXT:
                self.chunk("text", "\n".join(piece))
                piece, size = [], 0
            piece.append(text)
            size += len(text) + 1
        if piece:
            self.chunk("text", "\n".join(piece))
            self.last_text = texts[-1][-500:]

    def show(self, event: AgentEvent) -> None:
        """What an agent's event shows in the output (the same for an implementer's
        iteration and a verifier's or reviewer's run); other events show nothing."""
        match event:
            case AgentText(text=text):
                self.chunk("text", text)
            case AgentLines(texts=texts):
                self.lines(texts)
            case AgentToolUse(name=name, summary=summary):
                self.chunk("tool_use", f"{name}: {summary}" if summary else name)
            case AgentToolResult(text=text, is_error=is_error):
                self.chunk("tool_error" if is_error else "tool_result", text[:2000])
                if is_error and self.confined:
                    self._refused_write(text)
            case AgentStderr(text=text):
                self.chunk("stderr", text)
                if self.confined:
                    self._refused_write(text)
            case AgentNotice(text=text):
                self.chunk("notice", text)
            case AgentRateLimit(status="allowed"):
                pass  # printed on every run with subscription auth: not news
            case AgentRateLimit(status=status, resets_at=resets_at):
                self.chunk(
                    "notice",
                    f"rate limit {status}" + (f", resets at {resets_at}" if resets_at else ""),
                )
            case AgentPermissionRequest(tool_name=tool, input=tool_input):
                self.chunk("notice", f"asks to run {tool}: {tool_summary(tool, tool_input)}")
            case AgentPermissionDecision(request=ask, answer=answer):
                how = {"config_rule": f"by rule {answer.rule_id}", "manual": "by a person"}.get(
                    answer.method, "by the policy"
                )
                line = f"{ask.tool_name} {'allowed' if answer.allow else 'denied'} {how}"
                if not answer.allow and answer.message:
                    line += f": {answer.message}"
                self.raw(b"[pokeralph] " + line.encode())
                self.chunk("notice", line)
            case AgentPermissionDenied(tool_name=tool, message=message):
                line = f"the agent refused {tool} on its own" + (f": {message}" if message else "")
                self.chunk("notice", line)

    def _refused_write(self, text: str) -> None:
        """A write the sandbox refused (the kernel's words for a read-only mount), said
        once per line of the agent's, at most :data:`MAX_REFUSALS` times a run."""
        for line in text.splitlines():
            if not READ_ONLY.search(line):
                continue
            said = line.strip()[:300]
            if said in self._refusals or len(self._refusals) >= MAX_REFUSALS:
                return
            self._refusals.add(said)
            message = (
                f"the sandbox refused a write ({said}): outside the working tree only what "
                "sandbox.filesystem.readWrite lists is writable (`pokeralphctl config set "
                "--user sandbox.filesystem.readWrite '[\"PATH\"]'`), and .git and "
                ".pokeralph/ never are"
            )
            self.raw(b"[pokeralph] " + message.encode())
            self.chunk("notice", message)

    def flush(self) -> None:
        """Publish what is pending; write the log's lines if :data:`LOG_INTERVAL` has
        passed since it was last written, else once it has (even if the agent says
        nothing more meanwhile: a long tool call must not keep its last lines from the
        log)."""
        if self._log_lines:
            now = self._now()
            if now >= self._log_due:
                self._log_due = now + LOG_INTERVAL
                self._write_log()
            else:
                self._write_log_later(self._log_due - now)
        if self._chunks or self._dropped:
            chunks, self._chunks = self._chunks, []
            self._pending_chars = 0
            if self._dropped:
                chunks.append(
                    Chunk("notice", f"[{self._dropped} chunks coalesced away; see the log]")
                )
                self._dropped = 0
            self._publish(chunks)

    def _write_log_later(self, delay: float) -> None:
        """Write the log's pending lines in ``delay`` seconds (one timer at a time, on the
        running event loop; without one, as in a test's own flushes, the next flush or
        the close writes them)."""
        if self._log_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._log_timer = loop.call_later(delay, self._log_timer_fired)

    def _log_timer_fired(self) -> None:
        self._log_timer = None
        if self._log_lines:
            self._log_due = self._now() + LOG_INTERVAL
            self._write_log()

    async def _sleep_on_clock(self, deadline: float) -> None:
        await anyio.sleep(max(0.0, deadline - self._now()))

    async def run(self) -> None:
        """Publish pending chunks at the tick after the first of them came, until
        cancelled."""
        while True:
            await self._wake.wait()
            if self._window:  # (at once if this task comes late: a chunk waits one window)
                await self._sleep_until(self._due)
            self._wake = anyio.Event()
            self.flush()

    def close(self) -> None:
        if self._log_timer is not None:
            self._log_timer.cancel()
            self._log_timer = None
        self._write_log()
        self.flush()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
