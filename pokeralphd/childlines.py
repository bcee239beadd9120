"""A child's output as lines, bounded: what the daemon reads of every process it starts.

- :func:`iter_lines` gives the lines (without the newline), the last one even without a
  newline; a line longer than :data:`MAX_LINE` bytes comes in pieces of that size, so a
  child printing one endless line never makes us hold more than that.
- :func:`iter_line_blocks` gives the same lines a read at a time, for whoever handles a
  chatty child's lines together rather than one by one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import ByteReceiveStream

MAX_LINE = 1 << 20  # a longer line is delivered in pieces of this size


async def iter_lines(stream: ByteReceiveStream, max_line: int = MAX_LINE) -> AsyncIterator[bytes]:
    """Lines (without the newline), the last one even without a newline.

    A line longer than ``max_line`` bytes comes in pieces of ``max_line`` bytes, so a
    child printing one endless line never makes us hold more than that.
    """
    async for lines in iter_line_blocks(stream, max_line):
        for line in lines:
            yield line


async def iter_line_blocks(
    stream: ByteReceiveStream, max_line: int = MAX_LINE
) -> AsyncIterator[list[bytes]]:
    """The lines of :func:`iter_lines`, a list for each read that completed any (a chatty
    child's read holds many: whoever takes them handles them together, not one by one).
    """
    buf = bytearray()
    while True:
        try:
            chunk = await stream.receive(1 << 16)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            break
        buf += chunk
        end = buf.rfind(b"\n")
        lines: list[bytes] = []
        if end >= 0:
            lines = bytes(buf[:end]).split(b"\n")  # one C-level split for the read
            del buf[: end + 1]
            if end >= max_line:  # then a line may be longer than max_line
                lines = [piece for line in lines for piece in _pieces(line, max_line)]
        while len(buf) > max_line:
            lines.append(bytes(buf[:max_line]))
            del buf[:max_line]
        if lines:
            yield lines
    if buf:
        yield [bytes(buf)]


def _pieces(line: bytes, max_line: int) -> list[bytes]:
    if len(line) <= max_line:
        return [line]
    return [line[at : at + max_line] for at in range(0, len(line), max_line)]
