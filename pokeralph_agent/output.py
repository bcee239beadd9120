"""Tool output as the model sees it: at most :data:`MAX_OUTPUT` bytes of UTF-8, and when
more was produced, a note saying what was cut (seed 001's ToolResult rule: 10 KB, larger
outputs truncated with a summary)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_OUTPUT = 10 * 1024
NOTE_ROOM = 300  # bytes kept free for the note


@dataclass(frozen=True)
class Capped:
    text: str
    truncated: bool
    total_bytes: int
    total_lines: int
    shown_bytes: int


def _cut(data: bytes, size: int, from_end: bool) -> str:
    """At most ``size`` bytes of ``data`` from its start (or end), on a character boundary."""
    part = data[-size:] if from_end else data[:size]
    return part.decode("utf-8", errors="ignore") if size else ""


def cap(
    text: str, limit: int = MAX_OUTPUT, keep: Literal["head", "tail", "both"] = "head"
) -> Capped:
    """``text`` within ``limit`` bytes, with a note of what was cut when it did not fit.

    ``head`` keeps the start (a file), ``tail`` the end, ``both`` the first fifth and the
    rest from the end (a command: how it began, and how it ended)."""
    data = text.encode("utf-8", errors="replace")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    if len(data) <= limit:
        return Capped(text, False, len(data), lines, len(data))
    room = max(0, limit - NOTE_ROOM)
    if keep == "head":
        head, tail = _cut(data, room, False), ""
    elif keep == "tail":
        head, tail = "", _cut(data, room, True)
    else:
        first = room // 5
        head, tail = _cut(data, first, False), _cut(data, room - first, True)
    shown = len(head.encode()) + len(tail.encode())
    cut = len(data) - shown
    where = {"head": "the start", "tail": "the end", "both": "the start and the end"}[keep]
    note = (
        f"[output truncated: {cut:,} of {len(data):,} bytes ({lines:,} lines) cut; showing {where}]"
    )
    if keep == "head":
        body = f"{head}\n{note}"
    elif keep == "tail":
        body = f"{note}\n{tail}"
    else:
        body = f"{head}\n{note}\n{tail}"
    return Capped(body, True, len(data), lines, shown)
