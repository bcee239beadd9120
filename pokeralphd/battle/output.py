"""Streaming an iteration's output: the log file and coalesced ``iteration_output`` events.

Every raw line goes to ``logs/iteration-{n}.log`` (buffered, flushed on each tick); every
parsed agent event becomes a chunk. Chunks are published together at most once per
coalescing window, so a chatty agent costs one event per window, not one per line, while
a quiet agent's line still reaches subscribers within the window.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import IO, TYPE_CHECKING

import anyio

from pokeralph_core import safefs
from pokeralphd.agents.base import (
    AgentEvent,
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
    from collections.abc import Callable
    from pathlib import Path

    from pokeralphd.protocol.events import ChunkKind

log = logging.getLogger(__name__)

MAX_CHUNK_TEXT = 16 * 1024
MAX_PENDING_CHUNKS = 500


class OutputStream:
    def __init__(
        self,
        log_path: Path,
        publish: Callable[[list[Chunk]], None],
        window_ms: int,
    ) -> None:
        self.log_path = log_path
        self._publish = publish
        self._window = window_ms / 1000
        self._chunks: list[Chunk] = []
        self._dropped = 0
        self._wake = anyio.Event()
        self._file: IO[bytes] | None = None
        self.last_text = ""
        self.log_error: str | None = None

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

    def raw(self, line: bytes) -> None:
        if self._file is not None:
            try:
                self._file.write(line if line.endswith(b"\n") else line + b"\n")
            except OSError as exc:  # disk full: keep the battle going, say so once
                self.log_error = f"log write failed: {exc.strerror}"
                self._file = None

    def chunk(self, kind: ChunkKind, text: str) -> None:
        if not text:
            return
        if kind == "text":
            self.last_text = text[-500:]
        if len(self._chunks) >= MAX_PENDING_CHUNKS:
            self._dropped += 1
        else:
            if len(text) > MAX_CHUNK_TEXT:
                text = (
                    text[:MAX_CHUNK_TEXT] + f"\n[… {len(text) - MAX_CHUNK_TEXT} chars in the log]"
                )
            self._chunks.append(Chunk(kind, text))
        self._wake.set()

    def show(self, event: AgentEvent) -> None:
        """What an agent's event shows in the output (the same for an implementer's
        iteration and a verifier's or reviewer's run); other events show nothing."""
        match event:
            case AgentText(text=text):
                self.chunk("text", text)
            case AgentToolUse(name=name, summary=summary):
                self.chunk("tool_use", f"{name}: {summary}" if summary else name)
            case AgentToolResult(text=text, is_error=is_error):
                self.chunk("tool_error" if is_error else "tool_result", text[:2000])
            case AgentStderr(text=text):
                self.chunk("stderr", text)
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

    def flush(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.flush()
        if self._chunks or self._dropped:
            chunks, self._chunks = self._chunks, []
            if self._dropped:
                chunks.append(
                    Chunk("notice", f"[{self._dropped} chunks coalesced away; see the log]")
                )
                self._dropped = 0
            self._publish(chunks)

    async def run(self) -> None:
        """Publish pending chunks once per window until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._window:
                await anyio.sleep(self._window)
            self.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
