"""Unix-socket streams on asyncio transports, not on anyio's raw-socket streams.

On asyncio, anyio (4.16) serves a Unix socket by registering ``future.set_result`` as the
socket's reader and removing it from the future's done-callback. When a receive is
cancelled in the same turn of the loop in which its socket became readable (a
connection closed at shutdown while its client is still sending, a cancel scope that
expires as data arrives), the reader runs after the cancel and before the callback:
``set_result`` on a cancelled future, an ``InvalidStateError`` in the loop's exception
handler. ``tests/unit/test_unixstream.py`` makes it happen every time, and shows that a
stream on an asyncio transport (where a protocol owns the reads) never does.

So every Unix-socket connection the daemon serves or makes is moved onto a transport
(:func:`on_transport`), and connections are made with :func:`connect`.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
import anyio.abc

if TYPE_CHECKING:
    from pathlib import Path


async def on_transport(stream: anyio.abc.ByteStream) -> anyio.abc.ByteStream:
    """``stream``'s socket on an asyncio transport (``stream`` is spent: nothing may have
    been read from it yet). Streams without a raw socket of their own (TCP's are on a
    transport already) are returned as they are."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if not isinstance(raw, socket.socket):  # none, or asyncio's already (TCP streams)
        return stream
    # The descriptor changes owner (no dup: that would need a second one, and a daemon
    # short of descriptors must still serve); ``stream`` is left with nothing to close.
    family, kind = raw.family, raw.type
    moved = socket.socket(family, kind, fileno=raw.detach())
    try:
        return await anyio.abc.SocketStream.from_socket(moved)
    except BaseException:
        moved.close()
        raise


async def connect(path: str | Path) -> anyio.abc.ByteStream:
    """A connection to the Unix socket at ``path``, on a transport."""
    return await on_transport(await anyio.connect_unix(path))
