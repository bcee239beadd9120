"""HTTP/1.1 for the chat clients: one POST on a connection of its own, over anyio, with h11.

A model call is one POST of JSON to one server whose reply's body is streamed back. httpx
did it through httpcore, which loads at each start of the agent a connection pool, HTTP/2
(h2, which the dashboard's hypercorn installs) and, when trio is installed, trio's
primitives; httpx itself adds ~25 ms more. Together that was over a third of a battle
run's start, paid on every iteration. :func:`post` does the one request with h11 (the
HTTP/1.1 state machine httpcore itself uses) over anyio's TCP and TLS streams; httpx is
left to ``fetch_webpage``, which needs redirects and decoding.

``timeout`` bounds making the connection (the TLS handshake included), each send and
each wait for bytes. The URL's path and query are percent-encoded as UTF-8 where HTTP
needs it and a non-ASCII host name is sent in IDNA, as httpx did; a header HTTP cannot
carry is :class:`UnsendableRequest` before anything is sent. The request asks for the body as is (``accept-encoding:
identity``) and says the connection closes after it. A response's head is bounded
(:data:`MAX_HEADERS`, as httpcore). Failures below HTTP are :class:`HttpFailure`:
:class:`ConnectFailed` (with the reason underneath, e.g. "connection refused"),
:class:`TimedOut` (a send) or :class:`ReadTimedOut`, or the connection breaking (reset, cut short, not HTTP/1.1).
"""

from __future__ import annotations

import socket
import ssl
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, urlsplit

import anyio
import h11

from pokeralph_agent.errors import (
    CertificateUntrusted,
    ConnectFailed,
    HostNotFound,
    HttpFailure,
    ReadTimedOut,
    TimedOut,
    UnsendableRequest,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Sequence

    from anyio.abc import ByteStream

MAX_HEADERS = 100 * 1024  # bytes of a response's head (h11's max_incomplete_event_size)
READ_SIZE = 64 * 1024
USER_AGENT = "pokeralph-agent"
E = TypeVar("E", bound=BaseException)
# What a path may hold as it is (RFC 3986's pchar and "/", besides the letters, digits and
# "-._~" quote never escapes); "%" keeps an escape already made. Anything else, such as a
# space or a non-ASCII letter, is percent-encoded as UTF-8, as httpx does.
PATH_SAFE = "/%!$&'()*+,;=:@"
QUERY_SAFE = PATH_SAFE + "?"


class Response:
    """A response's status; :meth:`body` streams the rest."""

    def __init__(self, head: h11.Response, wire: _Wire) -> None:
        self.status = head.status_code
        self.reason = head.reason.decode("latin-1")
        self._wire = wire

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (h11 checks its framing: a body cut short is
        an error, not an end)."""
        while True:
            event = await self._wire.next_event()
            if not isinstance(event, h11.Data):
                return
            yield bytes(event.data)


@asynccontextmanager
async def post(
    url: str,
    body: bytes,
    headers: Sequence[tuple[str, str]],
    timeout: float,
    ssl_context: ssl.SSLContext | None,
) -> AsyncIterator[Response]:
    """POST ``body`` to ``url``; the response, its connection closed on leaving.
    ``ssl_context`` is used for ``https`` only (without one, the system's CAs)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConnectFailed(f"not an http:// or https:// URL: {url!r}")
    secure = parts.scheme == "https"
    if secure and ssl_context is None:
        ssl_context = ssl.create_default_context()
    try:
        port = parts.port or (443 if secure else 80)
    except ValueError:
        raise ConnectFailed(f"not a port number in {url!r}") from None
    host = _ascii_host(parts.hostname)
    target = quote(parts.path or "/", safe=PATH_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=QUERY_SAFE)
    authority = f"[{host}]" if ":" in host else host  # an IPv6 address is bracketed
    if parts.port is not None:
        authority += f":{port}"
    head = [
        ("host", authority),
        ("user-agent", USER_AGENT),
        ("accept-encoding", "identity"),
        ("connection", "close"),
        ("content-type", "application/json"),
        ("content-length", str(len(body))),
        *headers,
    ]
    try:
        request = h11.Request(method="POST", target=target, headers=head)
    except (h11.LocalProtocolError, UnicodeError):  # a value with a line break, or not ASCII
        names = ", ".join(name for name, value in headers if not _header_safe(value))
        raise UnsendableRequest(f"HTTP cannot carry the {names or 'request'} header") from None
    stream = await _connect(host, port, ssl_context if secure else None, timeout)
    try:
        wire = _Wire(stream, timeout)
        await wire.send(request)
        await wire.send(h11.Data(data=body))
        await wire.send(h11.EndOfMessage())
        while True:
            event = await wire.next_event()
            if isinstance(event, h11.Response):
                break
            if not isinstance(event, h11.InformationalResponse):
                raise HttpFailure(f"the connection broke: no response ({type(event).__name__})")
        yield Response(event, wire)
    finally:
        await anyio.aclose_forcefully(stream)


def _ascii_host(host: str) -> str:
    """The host as DNS and the Host header want it: a non-ASCII name in IDNA."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise HostNotFound(f"not a host name: {host!r}") from None


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable()


async def _connect(
    host: str, port: int, context: ssl.SSLContext | None, timeout: float
) -> ByteStream:
    try:
        with anyio.fail_after(timeout):
            if context is not None:
                return await anyio.connect_tcp(
                    host,
                    port,
                    tls=True,
                    ssl_context=context,
                    tls_hostname=host,
                    tls_standard_compatible=False,  # no close_notify needed: h11 frames
                )
            return await anyio.connect_tcp(host, port)
    except TimeoutError:
        raise ConnectFailed("the connection timed out") from None
    except OSError as exc:  # refused, no route, unknown name, a refused TLS handshake
        if _underneath(exc, socket.gaierror) is not None:
            raise HostNotFound(_reason(exc)) from exc
        if _underneath(exc, ssl.SSLCertVerificationError) is not None:
            raise CertificateUntrusted(_reason(exc)) from exc
        raise ConnectFailed(_reason(exc)) from exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what lies underneath it (the first of a group: one per address tried)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return
        yield seen
        if isinstance(seen, ExceptionGroup) and seen.exceptions:
            seen = seen.exceptions[0]
        else:
            seen = seen.__cause__ or seen.__context__


def _underneath(exc: BaseException, kind: type[E]) -> E | None:
    return next((seen for seen in _chain(exc) if isinstance(seen, kind)), None)


def _reason(exc: BaseException) -> str:
    """What went wrong underneath anyio's "All connection attempts failed"."""
    for seen in _chain(exc):
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return "connection refused"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
    return str(exc) or type(exc).__name__


class _Wire:
    """One connection's h11 state and its stream, with the timeout."""

    def __init__(self, stream: ByteStream, timeout: float) -> None:
        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADERS)
        self.stream = stream
        self.timeout = timeout

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if not data:
            return
        try:
            with anyio.fail_after(self.timeout):
                await self.stream.send(data)
        except TimeoutError:
            raise TimedOut(f"the server took nothing for {self.timeout:g} s") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise HttpFailure(f"the connection broke: {str(exc) or type(exc).__name__}") from exc

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpFailure(f"the connection broke: {exc}") from exc
            if event is h11.PAUSED or isinstance(event, h11.Event):
                return event
            try:
                with anyio.fail_after(self.timeout):
                    data = await self.stream.receive(READ_SIZE)
            except TimeoutError:
                raise ReadTimedOut(f"no data for {self.timeout:g} s") from None
            except anyio.EndOfStream:
                data = b""  # h11 says whether the message could end here
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                broke = str(exc) or type(exc).__name__
                raise HttpFailure(f"the connection broke: {broke}") from exc
            try:
                self.conn.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise HttpFailure(f"the connection broke: {exc}") from exc
