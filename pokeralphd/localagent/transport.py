"""HTTP/1.1 for the chat clients: one request on one connection, over anyio, with h11.

httpx's default transport (httpcore) loads, at each start of the agent, a connection
pool, HTTP/2 (h2, a dependency of the dashboard's server) and, when trio is installed,
trio's primitives: a third of a battle run's start in the test environment. A model call
needs none of it: one POST to one server, the reply's body streamed back, a new client per
call. This transport does just that with h11 (the HTTP/1.1 state machine httpcore itself
uses) over anyio's TCP and TLS streams. httpx stays the client: it builds the request,
decodes the body and owns the exceptions, so the chat code is unchanged.

The timeouts are httpx's (``request.extensions["timeout"]``): ``connect`` bounds making
the connection (the TLS handshake included), ``write`` each send, ``read`` each wait for
bytes. Failures are raised as httpx's exceptions, as httpcore raises them: a connection
that cannot be made is :class:`httpx.ConnectError` (its cause the :class:`OSError`) or
:class:`httpx.ConnectTimeout`; a reply that breaks off or does not follow HTTP/1.1 is
:class:`httpx.RemoteProtocolError`. Response headers are bounded (100 KB, as httpcore).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import h11
import httpx

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator

    from anyio.abc import ByteStream

MAX_HEADERS = 100 * 1024  # bytes of a response's head (h11's max_incomplete_event_size)
READ_SIZE = 64 * 1024


class OneRequestTransport(httpx.AsyncBaseTransport):
    """Each request on a connection of its own, closed with its response."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self.ssl_context = ssl_context

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"cannot send a request to {url.scheme}:// URLs")
        stream = await _connect(url, self.ssl_context, timeouts.get("connect"))
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADERS)
        wire = _Wire(conn, stream, timeouts.get("read"), timeouts.get("write"))
        try:
            head = h11.Request(
                method=request.method, target=url.raw_path, headers=request.headers.raw
            )
            await wire.send(head)
            async for chunk in request.stream:  # type: ignore[union-attr]
                await wire.send(h11.Data(data=chunk))
            await wire.send(h11.EndOfMessage())
            while True:
                event = await wire.next_event()
                if isinstance(event, h11.Response):
                    break
                if not isinstance(event, h11.InformationalResponse):
                    raise httpx.RemoteProtocolError(f"the server sent no response: {event!r}")
        except BaseException:
            await anyio.aclose_forcefully(stream)
            raise
        return httpx.Response(
            status_code=event.status_code,
            headers=event.headers.raw_items(),
            stream=_Body(wire),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": bytes(event.reason)},
        )


async def _connect(url: httpx.URL, context: ssl.SSLContext, timeout: float | None) -> ByteStream:
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    try:
        with anyio.fail_after(timeout):
            if secure:
                return await anyio.connect_tcp(
                    url.host,
                    port,
                    tls=True,
                    ssl_context=context,
                    tls_hostname=url.host,
                    tls_standard_compatible=False,  # as httpcore: no close_notify needed
                )
            return await anyio.connect_tcp(url.host, port)
    except TimeoutError:
        raise httpx.ConnectTimeout(f"no connection to {url.host}:{port} in {timeout:g} s") from None
    except OSError as exc:  # refused, no route, a failed TLS handshake (ssl.SSLError)
        raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc


class _Wire:
    """One connection's h11 state and its stream, with the timeouts."""

    def __init__(
        self, conn: h11.Connection, stream: ByteStream, read: float | None, write: float | None
    ) -> None:
        self.conn = conn
        self.stream = stream
        self.read = read
        self.write = write

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if not data:
            return
        try:
            with anyio.fail_after(self.write):
                await self.stream.send(data)
        except TimeoutError:
            raise httpx.WriteTimeout(f"could not send for {self.write:g} s") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is h11.PAUSED or isinstance(event, h11.Event):
                return event
            try:
                with anyio.fail_after(self.read):
                    data = await self.stream.receive(READ_SIZE)
            except TimeoutError:
                raise httpx.ReadTimeout(f"no data for {self.read:g} s") from None
            except anyio.EndOfStream:
                data = b""  # h11 says whether the message could end here
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            try:
                self.conn.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc


class _Body(httpx.AsyncByteStream):
    """The response's body as it arrives; closing it closes the connection."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            event = await self.wire.next_event()
            if not isinstance(event, h11.Data):
                return  # EndOfMessage (h11 checked the framing: a cut body is an error)
            yield bytes(event.data)

    async def aclose(self) -> None:
        await anyio.aclose_forcefully(self.wire.stream)
