"""The egress proxy over a real Unix socket, to a real HTTP server on 127.0.0.1: what it
lets through, what it asks, what it refuses, and its bounds."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import anyio
import pytest

from pokeralph_core.config.sandbox import parse_host_pattern
from pokeralphd.sandbox.proxy import (
    MAX_HEAD,
    EgressProxy,
    NetworkRequest,
    ProxyRequestError,
    parse_head,
)
from tests.helpers import short_tmpdir

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pokeralphd.sandbox.proxy import Decision


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{self.path} {self.headers.get('connection')}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_heads_parse() -> None:
    connect = parse_head(b"CONNECT Api.Example.com:443 HTTP/1.1\r\nHost: x")
    assert connect.request == NetworkRequest("api.example.com", 443) and connect.forward is None
    plain = parse_head(
        b"GET http://h.org:8080/a?b=1 HTTP/1.1\r\nHost: h.org\r\nProxy-Authorization: x\r\n"
        b"Connection: keep-alive"
    )
    assert plain.request == NetworkRequest("h.org", 8080)
    assert plain.forward == b"GET /a?b=1 HTTP/1.1\r\nHost: h.org\r\nConnection: close\r\n\r\n"
    v6 = parse_head(b"CONNECT [::1]:8443 HTTP/1.1")
    assert v6.request.target == "[::1]:8443"
    for bad in (
        b"GET /relative HTTP/1.1",
        b"CONNECT host HTTP/1.1",
        b"junk",
        b"GET ftp://x/ HTTP/1.1",
    ):
        with pytest.raises(ProxyRequestError):
            parse_head(bad)


async def _idle(proxy: EgressProxy) -> None:
    """Until the proxy holds no connection (before its listener is cancelled: a cancel
    landing as a client closes is a race of its own)."""
    with anyio.fail_after(10):
        await proxy.idle()


async def _ask(path: str, head: bytes) -> bytes:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(head)
        out = b""
        with anyio.fail_after(10):
            while True:
                try:
                    out += await stream.receive()
                except anyio.EndOfStream:
                    return out


@pytest.mark.anyio
async def test_allowed_passes_others_are_asked_once_and_refused_with_the_key(port: int) -> None:
    asked: list[NetworkRequest] = []
    release, was_asked, both_answered = anyio.Event(), anyio.Event(), anyio.Event()

    async def decide(request: NetworkRequest) -> Decision:
        asked.append(request)
        was_asked.set()
        await release.wait()
        return "deny"

    refused: list[str] = []
    proxy = EgressProxy(
        [parse_host_pattern(f"127.0.0.1:{port}")],
        decide,
        on_refused=lambda r, m: refused.append(r.target),
    )
    sock = str(short_tmpdir("prpx") / "p.sock")
    get = f"GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: a\r\n\r\n".encode()
    other = b"CONNECT example.invalid:443 HTTP/1.1\r\n\r\n"
    answers: list[bytes] = []

    async def other_one() -> None:
        answers.append(await _ask(sock, other))
        if len(answers) == 2:
            both_answered.set()

    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve, sock)
        ok = await _ask(sock, get)
        assert ok.startswith(b"HTTP/1.0 200") and ok.endswith(b"/x close")
        tg.start_soon(other_one)
        tg.start_soon(other_one)
        with anyio.fail_after(10):
            await was_asked.wait()
        release.set()
        with anyio.fail_after(10):
            await both_answered.wait()
        await _idle(proxy)
        tg.cancel_scope.cancel()
    assert asked == [NetworkRequest("example.invalid", 443)]  # two asks, one question
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 403")
        assert b"X-Pokeralph-Refused: example.invalid:443" in answer
        assert b'add "example.invalid:443" to sandbox.network.allow' in answer
    assert refused == ["example.invalid:443"] * 2
    assert proxy.let_through == 1


@pytest.mark.anyio
async def test_a_failing_hook_refuses_and_no_hook_refuses(port: int) -> None:
    async def broken(request: NetworkRequest) -> Decision:
        raise RuntimeError("inbox down")

    for proxy in (EgressProxy([], broken), EgressProxy([])):
        sock = str(short_tmpdir("prpx") / "p.sock")
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve, sock)
            head = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()
            assert (await _ask(sock, head)).startswith(b"HTTP/1.1 403")
            await _idle(proxy)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_connect_tunnels_once_allowed_always(port: int) -> None:
    answers: list[Decision] = ["allow_always"]

    async def decide(request: NetworkRequest) -> Decision:
        return answers.pop()

    proxy = EgressProxy([], decide)
    sock = str(short_tmpdir("prpx") / "p.sock")
    head = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()
    request = b"GET /t HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve, sock)
        for _ in range(2):  # the second is not asked: the hook has no answer left
            out = await _ask(sock, head + request)
            assert out.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.0 200")
        await _idle(proxy)
        tg.cancel_scope.cancel()
    assert proxy.allowed("127.0.0.1", port)


@pytest.mark.anyio
async def test_bounds(port: int) -> None:
    proxy = EgressProxy([parse_host_pattern(f"127.0.0.1:{port}")], max_connections=1)
    sock = str(short_tmpdir("prpx") / "p.sock")
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve, sock)
        huge = b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n"
        assert (await _ask(sock, huge)).startswith(b"HTTP/1.1 431")
        await _idle(proxy)
        async with await anyio.connect_unix(sock) as held:  # one open connection...
            await held.send(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            assert (await held.receive()).startswith(b"HTTP/1.1 200")
            assert proxy.connections == 1
            # ...and the next is told at once
            assert (await _ask(sock, b"CONNECT a.b:443 HTTP/1.1\r\n\r\n")).startswith(
                b"HTTP/1.1 503"
            )
        await _idle(proxy)
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_allowed_name_that_resolves_to_this_machine_is_refused(port: int) -> None:
    """DNS rebinding: a name on the allowlist pointed at 127.0.0.1 would reach the host's
    own services (the dashboard, a database). The address itself may be allowed."""
    name = socket.gethostname().lower()
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        resolved = {str(info[4][0]) for info in infos}
    except OSError:
        resolved = set[str]()
    if not resolved or not all(a.startswith("127.") for a in resolved):
        pytest.skip(f"{name} does not resolve to the loopback here")
    proxy = EgressProxy([parse_host_pattern(f"{name}:{port}")])
    sock = str(short_tmpdir("prpx") / "p.sock")
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve, sock)
        out = await _ask(sock, f"CONNECT {name}:{port} HTTP/1.1\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 403") and b"resolves to this machine" in out
        assert proxy.let_through == 0
        await _idle(proxy)
        tg.cancel_scope.cancel()
