"""The chat clients' HTTP/1.1 against a raw server in this process: each body framing
read whole, what breaks said as what it is, and TLS verifying the server."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteStream, SocketAttribute
from anyio.streams.tls import TLSListener

from pokeralph_agent import transport
from pokeralph_agent.errors import (
    ApiStatusError,
    ConnectFailed,
    HttpFailure,
    ReadTimedOut,
    SettingError,
    UnsendableRequest,
)
from pokeralph_agent.ollama_chat import OllamaClient
from pokeralph_agent.session import Message
from pokeralph_agent.transport import MAX_HEADERS, post

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


async def _text(url: str, context: ssl.SSLContext | None = None, timeout: float = 5) -> str:
    context = context or ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    auth = [("authorization", "Bearer k")]
    async with post(url, b'{"a":1}', auth, timeout, context) as response:
        assert response.status == 200
        return b"".join([piece async for piece in response.body()]).decode()


def _fixed(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nx-seen: yes\r\ncontent-length: %d\r\n\r\n" % len(body) + body


REPLIES = {
    "content-length": _fixed(b"hello world"),
    "chunked": b"HTTP/1.1 200 OK\r\nx-seen: yes\r\ntransfer-encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    "until-close": b"HTTP/1.1 200 OK\r\nx-seen: yes\r\nconnection: close\r\n\r\nhello world",
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
    assert head.startswith(b"POST /api/chat?x=1 HTTP/1.1\r\n") and body == b'{"a":1}'
    lines = head.lower().split(b"\r\n")
    for line in (f"host: 127.0.0.1:{port}", "content-length: 7", "authorization: bearer k"):
        assert line.encode() in lines
    assert b"accept-encoding: identity" in lines and b"connection: close" in lines


async def test_a_body_cut_short_is_a_protocol_error() -> None:
    async def answer(request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nx-seen: yes\r\ncontent-length: 100\r\n\r\nonly this"

    async with serving(answer) as port:
        with pytest.raises(HttpFailure, match="the connection broke"):
            await _text(f"http://127.0.0.1:{port}/")


async def test_a_head_past_the_bound_is_a_protocol_error() -> None:
    async def answer(request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nx-big: " + b"x" * (2 * MAX_HEADERS) + b"\r\n\r\n"

    async with serving(answer) as port:
        with pytest.raises(HttpFailure, match="the connection broke"):
            await _text(f"http://127.0.0.1:{port}/")


async def test_silence_is_a_read_timeout() -> None:
    async def answer(request: bytes) -> None:
        return None

    async with serving(answer) as port:
        with pytest.raises(ReadTimedOut, match=r"no data for 0\.2 s"):
            await _text(f"http://127.0.0.1:{port}/", timeout=0.2)


async def test_a_refused_connection_says_so() -> None:
    with socket.socket() as held:  # bound, never listening: refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        with pytest.raises(ConnectFailed) as caught:
            await _text(f"http://127.0.0.1:{port}/")
    assert caught.value.message == "connection refused"


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A server's TLS context with a certificate for 127.0.0.1 that no CA signed; and
    that certificate (made before the test's event loop runs: openssl blocks). An EC key
    (P-256): made at once, where an RSA key takes ~0.1 s of CPU."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = ["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    subprocess.run(
        ["openssl", "req", "-x509", *ec, "-nodes", "-days", "1", *names, *files],
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, cert


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@needs_openssl
async def test_tls_verifies_the_server(self_signed: tuple[ssl.SSLContext, Path]) -> None:
    server, cert = self_signed
    trusting = ssl.create_default_context(cafile=str(cert))

    async def answer(request: bytes) -> bytes:
        return REPLIES["content-length"]

    async with serving(answer, tls=server) as port:
        assert await _text(f"https://127.0.0.1:{port}/", trusting) == "hello world"
        with pytest.raises(ConnectFailed, match="certificate verify failed"):
            await _text(f"https://127.0.0.1:{port}/", ssl.create_default_context())


class _Wire(ByteStream):
    """A connection whose send and receive do what a test says."""

    def __init__(self, send: Callable[[], Awaitable[None]], receive: bytes = b"") -> None:
        self._send = send
        self._receive = receive
        self.sent = b""

    async def send(self, item: bytes) -> None:
        await self._send()
        self.sent += item

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._receive:
            raise anyio.BrokenResourceError  # no words: the name must say it
        data, self._receive = self._receive, b""
        return data

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def _connected(
    wire: _Wire, hosts: list[object] | None = None
) -> Callable[..., Awaitable[ByteStream]]:
    async def connect(*args: object) -> ByteStream:
        if hosts is not None:
            hosts.append(args[0])
        return wire

    return connect


async def _sent() -> None:
    pass


async def _broken() -> None:
    raise anyio.BrokenResourceError


@pytest.mark.parametrize("where", ["send", "receive"])
async def test_a_break_without_words_is_named_by_its_kind(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = _Wire(_broken) if where == "send" else _Wire(_sent)
    monkeypatch.setattr(transport, "_connect", _connected(wire))
    with pytest.raises(HttpFailure) as caught:
        await _text("http://127.0.0.1:9/")
    assert caught.value.message == "the connection broke: BrokenResourceError"


async def test_a_send_timing_out_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that takes nothing is as slow as one that sends nothing: both say which
    setting bounds the wait."""
    monkeypatch.setattr(transport, "_connect", _connected(_Wire(anyio.sleep_forever)))
    client = OllamaClient("http://127.0.0.1:9", "m", timeout=0.1, backoff=0)
    with pytest.raises(ApiStatusError) as caught:
        await client.chat([Message(role="user", content="hi")], [])
    assert "the server took nothing for 0.1 s (agent.local.timeoutSeconds)" in str(caught.value)
    assert caught.value.status is None and not caught.value.retryable


async def test_a_path_and_query_beyond_ascii_are_percent_encoded() -> None:
    seen: list[bytes] = []

    async def answer(request: bytes) -> bytes:
        seen.append(request)
        return REPLIES["content-length"]

    async with serving(answer) as port:
        assert await _text(f"http://127.0.0.1:{port}/ü/a b/%41?q=ä&r=1") == "hello world"
    assert seen[0].startswith(b"POST /%C3%BC/a%20b/%41?q=%C3%A4&r=1 HTTP/1.1\r\n")


async def test_a_host_beyond_ascii_is_reached_and_named_in_idna(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wire, hosts = _Wire(_sent, REPLIES["content-length"]), list[object]()
    monkeypatch.setattr(transport, "_connect", _connected(wire, hosts))
    assert await _text("http://user:pw@Bücher.example:8080/v1") == "hello world"
    assert hosts == ["xn--bcher-kva.example"]
    assert b"\r\nhost: xn--bcher-kva.example:8080\r\n" in wire.sent


async def test_a_header_http_cannot_carry_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts: list[object] = []
    monkeypatch.setattr(transport, "_connect", _connected(_Wire(_sent), hosts))
    for key in ("sk-1\n", "sk-ü"):
        with pytest.raises(UnsendableRequest, match="cannot carry the authorization header"):
            async with post("http://127.0.0.1:9/", b"{}", [("authorization", key)], 5, None):
                pass
    assert hosts == []


@pytest.mark.parametrize("key", ["sk-1\n", "sk-\u00fc", "sk-1 "])
async def test_an_api_key_http_cannot_carry_is_a_setting_error(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a traceback, not retried: the key names itself and nothing is sent."""
    hosts: list[object] = []
    monkeypatch.setattr(transport, "_connect", _connected(_Wire(_sent), hosts))
    client = OllamaClient("http://127.0.0.1:9", "m", api_key=key, backoff=0)
    with pytest.raises(SettingError, match=r"agent\.local\.apiKey cannot be used") as caught:
        await client.chat([Message(role="user", content="hi")], [])
    assert key not in caught.value.message and hosts == []


@needs_openssl
async def test_an_untrusted_certificate_says_what_to_do(
    self_signed: tuple[ssl.SSLContext, Path],
) -> None:
    """Not "is Ollama running?": the server answered; its certificate is the problem."""
    server, _ = self_signed

    async def answer(request: bytes) -> bytes:
        return REPLIES["content-length"]

    async with serving(answer, tls=server) as port:
        client = OllamaClient(f"https://127.0.0.1:{port}", "m", backoff=0)
        with pytest.raises(SettingError) as caught:
            await client.chat([Message(role="user", content="hi")], [])
    message = caught.value.message
    assert message.startswith(f"the certificate of https://127.0.0.1:{port} is not trusted (")
    assert "certificate verify failed" in message
    assert "use http://" in message and "SSL_CERT_FILE" in message
    assert "running" not in message


async def test_a_host_that_does_not_resolve_names_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tried: list[str] = []

    async def unknown(host: str, port: int, **kwargs: object) -> ByteStream:
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(anyio, "connect_tcp", unknown)
    client = OllamaClient("http://me:secret@ollama.example:11434", "m", backoff=0)
    with pytest.raises(SettingError) as caught:
        await client.chat([Message(role="user", content="hi")], [])
    assert caught.value.message == (
        "the host of http://me@ollama.example:11434 is not found (name or service not known): "
        "check the host in agent.local.baseUrl"
    )
    assert tried == ["ollama.example"]  # not retried: no server to start
