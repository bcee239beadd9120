"""The chat clients' HTTP/1.1 transport against a raw server in this process: each body
framing read whole, what breaks becomes httpx's exception as httpcore raises it, and TLS
verifies the server."""

from __future__ import annotations

import gzip
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import ByteStream, SocketAttribute
from anyio.streams.tls import TLSListener

from pokeralphd.localagent.transport import MAX_HEADERS, OneRequestTransport

pytestmark = pytest.mark.anyio
Answer = Callable[[bytes], Awaitable[bytes | None]]  # the request -> the raw reply


async def _request(stream: ByteStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += await stream.receive()
    return data


@asynccontextmanager
async def serving(answer: Answer, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """A server on 127.0.0.1 sending ``answer(request)`` (None: send nothing, hold on)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)

    async def handle(stream: ByteStream) -> None:
        async with stream:
            reply = await answer(await _request(stream))
            if reply is None:
                await anyio.sleep_forever()
            else:
                await stream.send(reply)

    served = TLSListener(listener, tls, standard_compatible=False) if tls else listener
    async with served, anyio.create_task_group() as tg:
        tg.start_soon(served.serve, handle)
        yield port
        tg.cancel_scope.cancel()


def _client(context: ssl.SSLContext | None = None, timeout: float = 5) -> httpx.AsyncClient:
    transport = OneRequestTransport(context or ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    return httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False)


async def _text(url: str, client: httpx.AsyncClient | None = None) -> str:
    async with client or _client() as c, c.stream("POST", url, json={"a": 1}) as response:
        return "".join([piece async for piece in response.aiter_text()])


def _fixed(body: bytes, *headers: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n" % len(body) + b"".join(
        h + b"\r\n" for h in headers
    )
    return head + b"\r\n" + body


REPLIES = {
    "content-length": _fixed(b"hello world"),
    "chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    "until-close": b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello world",
    "gzip": _fixed(gzip.compress(b"hello world"), b"content-encoding: gzip"),
    "after-a-100": b"HTTP/1.1 100 Continue\r\n\r\n" + _fixed(b"hello world"),
}


@pytest.mark.parametrize("framing", sorted(REPLIES))
async def test_each_framing_is_read_whole(framing: str) -> None:
    seen: list[bytes] = []

    async def answer(request: bytes) -> bytes:
        seen.append(request)
        return REPLIES[framing]

    async with serving(answer) as port:
        assert await _text(f"http://127.0.0.1:{port}/api/chat?x=1") == "hello world"
    head, _, body = seen[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /api/chat?x=1 HTTP/1.1\r\n")
    assert f"host: 127.0.0.1:{port}".encode() in head.lower() and body == b'{"a":1}'


async def test_a_body_cut_short_is_a_protocol_error() -> None:
    async def answer(request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this"

    async with serving(answer) as port:
        with pytest.raises(httpx.RemoteProtocolError):
            await _text(f"http://127.0.0.1:{port}/")


async def test_a_head_past_the_bound_is_a_protocol_error() -> None:
    async def answer(request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nx-big: " + b"x" * (2 * MAX_HEADERS) + b"\r\n\r\n"

    async with serving(answer) as port:
        with pytest.raises(httpx.RemoteProtocolError):
            await _text(f"http://127.0.0.1:{port}/")


async def test_silence_is_a_read_timeout() -> None:
    async def answer(request: bytes) -> None:
        return None

    async with serving(answer) as port:
        with pytest.raises(httpx.ReadTimeout):
            await _text(f"http://127.0.0.1:{port}/", _client(timeout=0.2))


async def test_a_refused_connection_is_a_connect_error_caused_by_the_refusal() -> None:
    with socket.socket() as held:  # bound, never listening: refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        with pytest.raises(httpx.ConnectError) as caught:
            await _text(f"http://127.0.0.1:{port}/")
    causes = []
    seen: BaseException | None = caught.value
    while seen is not None:
        causes.append(seen)
        seen = seen.__cause__
    assert any(isinstance(c, ConnectionRefusedError) for c in causes)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_tls_verifies_the_server(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = ["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *names, *files],
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def answer(request: bytes) -> bytes:
        return REPLIES["content-length"]

    async with serving(answer, tls=server) as port:
        assert await _text(f"https://127.0.0.1:{port}/", _client(trusting)) == "hello world"
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await _text(f"https://127.0.0.1:{port}/", _client(ssl.create_default_context()))
