"""Message framing: newline-delimited JSON, or LSP-style ``Content-Length`` headers.

The framing is chosen per connection from its first bytes: a connection that starts
with a ``Content-Length:`` (or ``Content-Type:``) header speaks LSP framing, anything
else one JSON message per line. Replies use the connection's framing.

Every byte the decoder holds is bounded, whatever the peer sends:

- before the framing is known, leading whitespace is discarded as it arrives and the
  choice is made within the first :data:`DETECT_PREFIX` bytes, so nothing piles up;
- a line (complete or not) longer than ``max_message`` raises :class:`FrameTooLarge`;
- an LSP header block longer than :data:`MAX_HEADER_BLOCK` raises :class:`FrameError`,
  a ``Content-Length`` over ``max_message`` :class:`FrameTooLarge` before any of the
  body is buffered.

``Content-Length`` is read strictly: ASCII digits only (no sign, no ``_``, no inner
spaces, at most :data:`MAX_LENGTH_DIGITS` of them), exactly one such header per message.
"""

from __future__ import annotations

import re
from typing import Literal

DEFAULT_MAX_MESSAGE = 1 << 20  # 1 MiB
MAX_HEADER_BLOCK = 8 * 1024
MAX_LENGTH_DIGITS = 12  # anything longer is absurd, whatever max_message says
_HEADER_PREFIXES = (b"content-length", b"content-type")
DETECT_PREFIX = max(map(len, _HEADER_PREFIXES))  # bytes needed, at most, to choose
_WHITESPACE = b" \t\r\n"
_DIGITS = re.compile(rb"[0-9]{1,%d}" % MAX_LENGTH_DIGITS)

Mode = Literal["line", "lsp"]


class FrameTooLarge(Exception):
    """Raised when a message (or an unterminated line) exceeds the size limit."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"message of {size} bytes or more exceeds the limit of {limit} bytes")


class FrameError(Exception):
    """Raised when LSP headers are malformed; the stream cannot be resynchronised."""


class FrameDecoder:
    """Incremental decoder: ``feed(bytes)`` returns every complete message body so far."""

    def __init__(self, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        self.max_message = max_message
        self.mode: Mode | None = None
        self._buf = bytearray()
        self._need: int | None = None  # LSP: body length once headers are read
        self._scan_from = 0

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a message (bounded; see the module doc)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        if self.mode is None:
            # Undecided: keep only what can still matter, the bytes after leading whitespace.
            self._buf += data.lstrip(_WHITESPACE) if not self._buf else data
            if not self._detect():
                return []
        else:
            self._buf += data
        if self.mode == "line":
            return self._lines()
        return self._lsp()

    def feed_block(self, data: bytes) -> bytes | list[bytes]:
        """:meth:`feed`, except that in line mode the complete lines come back as one block
        (``bytes`` ending with a newline) when it is within ``max_message`` -- then so is
        each of its lines, and nothing needs cutting or measuring line by line. A block's
        lines are neither trimmed nor filtered: :func:`split_block` makes them the bodies
        :meth:`feed` returns. The same bounds hold, with the same errors."""
        if self.mode != "line":
            return self.feed(data)
        buf = self._buf
        buf += data
        end = buf.rfind(b"\n", self._scan_from) + 1
        if end == 0 or end > self.max_message:
            return self._lines()  # no complete line yet, or lines to measure one by one
        block = bytes(buf[:end])
        del buf[:end]
        self._scan_from = len(buf)
        if len(buf) > self.max_message:
            raise FrameTooLarge(len(buf), self.max_message)
        return block

    def _detect(self) -> bool:
        head = bytes(self._buf[:DETECT_PREFIX]).lower()
        if not head:
            return False
        for prefix in _HEADER_PREFIXES:
            if head.startswith(prefix):
                self.mode = "lsp"
                return True
            if prefix.startswith(head):
                return False  # could still become a header: at most DETECT_PREFIX bytes wait
        self.mode = "line"
        return True

    def _lines(self) -> list[bytes]:
        buf = self._buf
        if buf.find(b"\n", self._scan_from) < 0:
            self._scan_from = len(buf)
            if len(buf) > self.max_message:
                raise FrameTooLarge(len(buf), self.max_message)
            return []
        # One C-level split for every complete line of the read; the tail waits for more.
        *lines, rest = bytes(buf).split(b"\n")
        buf[:] = rest
        self._scan_from = len(rest)
        if max(map(len, lines)) > self.max_message:
            raise FrameTooLarge(max(map(len, lines)), self.max_message)
        if len(rest) > self.max_message:
            raise FrameTooLarge(len(rest), self.max_message)
        # Blank lines are ignored; surrounding whitespace (a CRLF sender's \r) is trimmed.
        # All C-level (strip returns the line itself when there is nothing to trim): a
        # read of tiny or empty lines costs no Python loop.
        return list(filter(None, map(bytes.strip, lines)))

    def _lsp(self) -> list[bytes]:
        out: list[bytes] = []
        buf = self._buf
        while True:
            if self._need is None:
                end = buf.find(b"\r\n\r\n", 0, MAX_HEADER_BLOCK + 4)
                if end < 0:
                    if len(buf) > MAX_HEADER_BLOCK:
                        raise FrameError(
                            f"LSP header block longer than {MAX_HEADER_BLOCK} bytes "
                            "or not terminated by an empty line"
                        )
                    break
                self._need = self._content_length(bytes(buf[:end]))
                del buf[: end + 4]
            if len(buf) < self._need:
                break
            out.append(bytes(buf[: self._need]))
            del buf[: self._need]
            self._need = None
        return out

    def _content_length(self, block: bytes) -> int:
        length: int | None = None
        for raw in block.lstrip(b"\r\n").split(b"\r\n"):
            name, sep, value = raw.partition(b":")
            if not sep:
                raise FrameError(f"malformed LSP header line {raw[:60]!r}")
            if name.lower() != b"content-length":
                continue  # Content-Type or another header: not needed to frame
            if length is not None:
                raise FrameError("more than one Content-Length header")
            digits = value.strip(b" \t")
            if not _DIGITS.fullmatch(digits):
                raise FrameError(
                    f"bad Content-Length {digits[:20]!r}: "
                    f"expected 1 to {MAX_LENGTH_DIGITS} ASCII digits"
                )
            length = int(digits)
        if length is None:
            raise FrameError("LSP message without a Content-Length header")
        if length > self.max_message:
            raise FrameTooLarge(length, self.max_message)
        return length


def split_block(block: bytes) -> list[bytes]:
    """The message bodies of a block from :meth:`FrameDecoder.feed_block`, as
    :meth:`FrameDecoder.feed` returns them: blank lines dropped, whitespace trimmed."""
    lines = block.split(b"\n")
    lines.pop()  # what follows the block's last newline: nothing
    return list(filter(None, map(bytes.strip, lines)))


def encode_frame(body: bytes, mode: Mode | None) -> bytes:
    """Frame one message body for a connection in ``mode`` (line when unknown)."""
    if mode == "lsp":
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    return body + b"\n"
