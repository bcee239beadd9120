"""Accepting clients: our own accept loop, so that no client can end the daemon.

- **Every connection runs under a guard.** Whatever escapes a connection's handler is
  logged and ends that connection only; the daemon and the other clients go on.
- **A cap on connections.** At most ``max_connections`` at once, and never more than
  ``RLIMIT_NOFILE`` minus ``fd_reserve`` (descriptors kept for repository files, git and
  agents). A client past the cap gets a ``TOO_MANY_CONNECTIONS`` error (answering its
  first request by id and in its framing when it sends one promptly) and is closed.
- **Running out of descriptors anyway** (``EMFILE``/``ENFILE``, other parts of the daemon
  use descriptors too) is logged once per episode; a spare descriptor is given up for a
  moment to accept the waiting client and tell it, and accepting backs off (at most
  :data:`MAX_BACKOFF`) while the open connections are served as usual.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import SocketAttribute

from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.framing import FrameDecoder, FrameError, FrameTooLarge, encode_frame

if TYPE_CHECKING:
    import socket
    from collections.abc import Awaitable, Callable

    from anyio.abc import SocketListener, SocketStream, TaskGroup

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.01
MAX_BACKOFF = 0.5
MAX_REFUSING = 16  # refusals waiting for the client's first request, at most
REFUSE_WAIT = 0.5  # seconds a refused client has to send its first request
_OUT_OF_FDS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_TRANSIENT = {errno.ECONNABORTED, errno.EPROTO, errno.EINTR, errno.EAGAIN}


def connection_cap(max_connections: int, fd_reserve: int) -> int:
    """Connections served at once: ``max_connections``, lowered to fit RLIMIT_NOFILE."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - no such limit on this platform
        return max_connections
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, soft - fd_reserve))


def refusal(limit: int, request_id: jsonrpc.Id = None) -> dict[str, object]:
    return jsonrpc.error_response(
        request_id,
        ErrorCode.TOO_MANY_CONNECTIONS,
        f"the daemon already serves as many connections as it may ({limit}); retry later",
        {
            "limit": limit,
            "hint": "close idle connections, or raise maxConnections or the descriptor "
            "limit (ulimit -n)",
        },
    )


class Acceptor:
    def __init__(
        self,
        handler: Callable[[SocketStream], Awaitable[None]],
        *,
        max_connections: int,
        fd_reserve: int,
    ) -> None:
        self.handler = handler
        self.limit = connection_cap(max_connections, fd_reserve)
        self.active = 0  # connections being served
        self.refusing = 0  # refusals waiting for a first request
        self.refused = 0  # since start, for the log
        self._out_of_fds = False
        self._spare: int | None = None
        if self.limit < max_connections:
            log.info(
                "serving at most %d connections at once (RLIMIT_NOFILE keeps %d descriptors "
                "in reserve)",
                self.limit,
                fd_reserve,
            )

    async def serve(self, listener: SocketListener, tg: TaskGroup) -> None:
        """Accept until cancelled or the listener closes; handlers run in ``tg``."""
        raw = listener.extra(SocketAttribute.raw_socket)
        self._open_spare()
        delay = MIN_BACKOFF
        failures = 0
        try:
            while True:
                try:
                    stream = await listener.accept()
                except anyio.ClosedResourceError:
                    return
                except anyio.BrokenResourceError as exc:
                    cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else None
                    code = cause.errno if cause is not None else None
                    if code in _TRANSIENT:
                        continue
                    if code in _OUT_OF_FDS:
                        self._note_out_of_fds(cause)
                        if self._refuse_with_spare(raw):
                            await anyio.lowlevel.checkpoint()
                            continue
                    else:
                        failures += 1
                        if failures & (failures - 1) == 0:  # 1st, 2nd, 4th, 8th...
                            log.error(
                                "accepting a connection failed (%d times): %r; retrying",
                                failures,
                                cause or exc,
                            )
                    await anyio.sleep(delay)
                    delay = min(delay * 2, MAX_BACKOFF)
                    continue
                delay = MIN_BACKOFF
                failures = 0
                if self._out_of_fds:
                    self._out_of_fds = False
                    log.warning("accepting connections again (%d open)", self.active)
                if self.active >= self.limit:
                    self._refuse(stream, tg)
                    continue
                self.active += 1
                tg.start_soon(self._run, stream)
        finally:
            self._close_spare()

    async def _run(self, stream: SocketStream) -> None:
        try:
            await self.handler(stream)
        except Exception:
            log.exception("a client connection failed; it is closed, the daemon goes on")
        finally:
            self.active -= 1
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    # -- past the cap
    def _refuse(self, stream: SocketStream, tg: TaskGroup) -> None:
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "refused a connection: %d open, the limit (refused %d so far)",
                self.active,
                self.refused,
            )
        if self.refusing >= MAX_REFUSING:
            _refuse_now(stream.extra(SocketAttribute.raw_socket), self.limit)
            tg.start_soon(_close, stream)
            return
        self.refusing += 1
        tg.start_soon(self._refuse_politely, stream)

    async def _refuse_politely(self, stream: SocketStream) -> None:
        """Answer the client's first request (its id, its framing) with the refusal."""
        try:
            decoder = FrameDecoder(64 << 10)
            request_id: jsonrpc.Id = None
            with anyio.move_on_after(REFUSE_WAIT):
                while True:
                    bodies = decoder.feed(await stream.receive(1 << 16))
                    if bodies:
                        first = jsonrpc.decode_fast(bodies[:1])
                        if first and not isinstance(first[0].id, msgspec.UnsetType):
                            request_id = first[0].id
                        break
            frame = encode_frame(jsonrpc.encode(refusal(self.limit, request_id)), decoder.mode)
            with anyio.move_on_after(1):
                await stream.send(frame)
                await stream.send_eof()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        except (OSError, FrameError, FrameTooLarge) as exc:
            log.debug("refusing a connection: %s", exc)
        finally:
            self.refusing -= 1
            await _close(stream)

    # -- out of descriptors
    def _note_out_of_fds(self, cause: OSError | None) -> None:
        if not self._out_of_fds:
            self._out_of_fds = True
            log.error(
                "out of file descriptors (%s) with %d connections open: refusing new ones "
                "until some close; raise the limit (ulimit -n) or lower maxConnections",
                cause.strerror if cause else "?",
                self.active,
            )

    def _open_spare(self) -> None:
        if self._spare is None:
            with contextlib.suppress(OSError):
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def _close_spare(self) -> None:
        if self._spare is not None:
            with contextlib.suppress(OSError):
                os.close(self._spare)
            self._spare = None

    def _refuse_with_spare(self, raw: socket.socket) -> bool:
        """Free the spare descriptor, accept one waiting client, tell it, close it.

        True if a client was refused (progress: try again at once), False if there was
        none or no descriptor to spare (then back off)."""
        if self._spare is None:
            self._open_spare()
            return False
        self._close_spare()
        try:
            try:
                client, _addr = raw.accept()
            except OSError:
                return False
            with client:
                _refuse_now(client, self.limit)
            self.refused += 1
            return True
        finally:
            self._open_spare()


def _refuse_now(sock: socket.socket, limit: int) -> None:
    """The refusal, line-framed, without waiting (a fresh socket's buffer takes it)."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(encode_frame(jsonrpc.encode(refusal(limit)), "line"))


async def _close(stream: SocketStream) -> None:
    with anyio.CancelScope(shield=True):
        await stream.aclose()
