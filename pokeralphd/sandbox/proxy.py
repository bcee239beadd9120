"""The egress proxy of one confined run: HTTP ``CONNECT`` (and plain-HTTP absolute-URI
requests) on a Unix socket, letting through the hosts of an allowlist and asking about
any other.

The run's network namespace has no route out; its only way is the bridge
(:mod:`.bridge`) to this proxy's socket. A target on the allowlist (a
:class:`~pokeralph_core.config.sandbox.HostPattern`: the backend's model endpoint and
``sandbox.network.allow``) is connected at once. Any other goes to the ``decide`` hook
with a :class:`NetworkRequest` (the permission request ``network {host, port}`` the daemon
puts to its approval rules or a person): ``allow_once`` lets this connection through,
``allow_always`` this and every later one to the same host and port, ``deny`` (or no
hook) refuses it with a 403 whose body names the host and the key that allows it; every
refusal is also told to ``on_refused`` (the iteration's ``[pokeralph]`` log line).

The proxy resolves names itself and connects to the address it checked: an allowed name
that resolves to this machine is refused (DNS rebinding onto the host's own services);
an IP literal, or ``localhost``, is taken as meant.

Bounded: :data:`MAX_CONNECTIONS` connections at once (one more is answered 503 at once),
a request head of at most :data:`MAX_HEAD` bytes read within :data:`HEAD_TIMEOUT` seconds
(431 past it), at most :data:`MAX_PENDING` hosts waiting for a decision at once (the
asks for one host share its answer). A plain-HTTP request is sent on with
``Connection: close``, so one connection carries requests to one host only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import anyio
import anyio.abc

from pokeralph_core.config.sandbox import HostPattern, normalize_host
from pokeralphd.unixstream import on_transport

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

Decision = Literal["allow_once", "allow_always", "deny"]
MAX_CONNECTIONS = 64
MAX_HEAD = 16 * 1024
HEAD_TIMEOUT = 30.0
MAX_PENDING = 16
CONNECT_TIMEOUT = 15.0
CHUNK = 1 << 16
ALLOW_KEY = "sandbox.network.allow"


@dataclass(frozen=True, slots=True)
class NetworkRequest:
    """A run wants to reach ``host:port``: the input of the permission request ``network``."""

    host: str
    port: int

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def params(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port}


@dataclass(slots=True)
class _Ask:
    """A decision under way for one host and port; the later asks wait for it."""

    done: anyio.Event = field(default_factory=anyio.Event)
    allowed: bool = False


class ProxyRequestError(Exception):
    """Raised when a request head cannot be served: ``status`` and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def refusal(request: NetworkRequest, why: str = "") -> str:
    """The words a refused run sees: which host, and which key allows it."""
    because = why or f"{request.target} is not in {ALLOW_KEY}"
    return (
        f"pokeralph sandbox: the connection to {request.target} was refused: {because}. "
        f'To allow it, add "{request.target}" to {ALLOW_KEY}, or allow it when asked.'
    )


@dataclass(frozen=True, slots=True)
class Head:
    """A parsed request head: where to, and what to send on (None for CONNECT)."""

    request: NetworkRequest
    forward: bytes | None


def parse_head(head: bytes) -> Head:
    """The target of a request head (raises ProxyRequestError)."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProxyRequestError(400, "a malformed request line") from exc
    if method.upper() == "CONNECT":
        host, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit() or not host:
            raise ProxyRequestError(400, f"CONNECT needs host:port, not {target[:100]!r}")
        return Head(_request(host, int(port_text)), None)
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ProxyRequestError(400, "only CONNECT and absolute http:// URLs go through")
    try:
        port = url.port or 80
    except ValueError as exc:
        raise ProxyRequestError(400, "a bad port") from exc
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [
        line
        for line in lines[1:]
        if line
        and line.split(b":", 1)[0].strip().lower()
        not in (b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive")
    ]
    first = f"{method} {path} {version}".encode("ascii", "replace")
    forward = b"\r\n".join([first, *kept, b"Connection: close", b"", b""])
    return Head(_request(url.hostname, port), forward)


def _request(host: str, port: int) -> NetworkRequest:
    if not 1 <= port <= 65535:
        raise ProxyRequestError(400, f"port {port} is out of range")
    return NetworkRequest(normalize_host(host), port)


class EgressProxy:
    """One run's proxy: its allowlist, its decision hook, its bounds."""

    def __init__(
        self,
        allow: Iterable[HostPattern],
        decide: Callable[[NetworkRequest], Awaitable[Decision]] | None = None,
        *,
        on_refused: Callable[[NetworkRequest, str], object] | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._allow = list(allow)
        self._decide = decide
        self._on_refused = on_refused
        self._max = max_connections
        self._open = 0
        self._drained: anyio.Event | None = None  # set when the last connection closes
        self.let_through = 0  # connections let through so far
        self._pending: dict[tuple[str, int], _Ask] = {}

    @property
    def connections(self) -> int:
        return self._open

    async def idle(self) -> None:
        """Until no connection is open (at once if none is)."""
        if self._open:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    def allowed(self, host: str, port: int) -> bool:
        return any(p.matches(host, port) for p in self._allow)

    async def serve(
        self, path: str, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen on the Unix socket ``path`` (mode 0600) until cancelled, then remove it."""
        listener = await anyio.create_unix_listener(path)
        try:
            os.chmod(path, 0o600)
            task_status.started()
            await listener.serve(self.handle)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
            with anyio.CancelScope(shield=True):
                await listener.aclose()

    async def serve_tcp(
        self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen on a free port of 127.0.0.1 until cancelled; the port is what
        ``task_status.started`` reports (Seatbelt's runs, which share the host's network
        and are allowed out to this port alone)."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        try:
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            task_status.started(port)
            await listener.serve(self.handle)
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()

    async def handle(self, accepted: anyio.abc.ByteStream) -> None:
        """Serve one connection (never raises)."""
        client = await on_transport(accepted)
        async with client:
            if self._open >= self._max:
                await _answer(client, 503, f"pokeralph sandbox: more than {self._max} connections")
                await _drain(client)
                return
            self._open += 1
            try:
                await self._serve(client)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                self._open -= 1
                if not self._open and self._drained is not None:
                    self._drained.set()
                    self._drained = None

    async def _serve(self, client: anyio.abc.ByteStream) -> None:
        try:
            head, rest = await _read_head(client)
            parsed = parse_head(head)
        except ProxyRequestError as exc:
            await _answer(client, exc.status, f"pokeralph sandbox: {exc.reason}")
            await _drain(client)
            return
        request = parsed.request
        if not await self._permitted(request):
            await self._refuse(client, request)
            return
        try:
            with anyio.fail_after(CONNECT_TIMEOUT):
                address = await _address(request)
                upstream = await anyio.connect_tcp(address, request.port)
        except ProxyRequestError as exc:
            await self._refuse(client, request, exc.reason)
            return
        except (OSError, TimeoutError) as exc:
            await _answer(client, 502, f"pokeralph sandbox: {request.target} unreachable: {exc}")
            return
        self.let_through += 1
        async with upstream:
            if parsed.forward is None:
                await client.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                await upstream.send(parsed.forward)
            if rest:
                await upstream.send(rest)
            async with anyio.create_task_group() as tg:  # either end is the connection's
                tg.start_soon(_copy, client, upstream)
                tg.start_soon(_copy, upstream, client)

    async def _permitted(self, request: NetworkRequest) -> bool:
        if self.allowed(request.host, request.port):
            return True
        if self._decide is None:
            return False
        key = (request.host, request.port)
        asked = self._pending.get(key)
        if asked is not None:  # someone asked already: share the answer
            await asked.done.wait()
            return asked.allowed
        if len(self._pending) >= MAX_PENDING:
            return False
        asked = self._pending[key] = _Ask()
        decision: Decision = "deny"
        try:
            decision = await self._decide(request)
        except Exception:  # a failing hook refuses; it never lets through
            decision = "deny"
        finally:
            if decision == "allow_always":
                self._allow.append(HostPattern(request.host, request.port))
            asked.allowed = decision in ("allow_once", "allow_always")
            del self._pending[key]
            asked.done.set()
        return asked.allowed

    async def _refuse(
        self, client: anyio.abc.ByteStream, request: NetworkRequest, why: str = ""
    ) -> None:
        message = refusal(request, why)
        if self._on_refused is not None:
            with contextlib.suppress(Exception):
                self._on_refused(request, message)
        await _answer(client, 403, message, refused=request.target)


async def _address(request: NetworkRequest) -> str:
    """Where to connect: an IP literal as it is; a name resolved here, and refused when it
    resolves to this machine (an allowed name pointed at 127.0.0.1 would reach the host's
    local services: allow the address itself for that). ``localhost`` is the hosts
    file's, not a DNS answer: it resolves as asked."""
    try:
        ipaddress.ip_address(request.host)
    except ValueError:
        pass
    else:
        return request.host
    infos = await anyio.getaddrinfo(request.host, request.port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise OSError(f"{request.host} has no address")
    if request.host != "localhost":
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%")[0])
            if ip.is_loopback or ip.is_unspecified:
                raise ProxyRequestError(
                    403,
                    f"{request.host} resolves to this machine ({address}); allow"
                    f" {address}:{request.port} itself if that is meant",
                )
    return addresses[0]


async def _read_head(client: anyio.abc.ByteStream) -> tuple[bytes, bytes]:
    buf = b""
    with anyio.move_on_after(HEAD_TIMEOUT):
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                return buf[:end], buf[end + 4 :]
            if len(buf) > MAX_HEAD:
                break
            try:
                buf += await client.receive(MAX_HEAD + 4 - len(buf) if len(buf) < MAX_HEAD else 1)
            except anyio.EndOfStream as exc:
                raise ProxyRequestError(400, "the request ended before its head") from exc
        raise ProxyRequestError(431, f"a request head longer than {MAX_HEAD} bytes")
    raise ProxyRequestError(408, f"no request head within {HEAD_TIMEOUT:g} s")


async def _drain(client: anyio.abc.ByteStream) -> None:
    """Half-close, then read (bounded) what the client still sends: closing a Unix socket
    with unread bytes resets it, and the client would lose the answer."""
    ended = (OSError, anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
    with contextlib.suppress(*ended):
        await client.send_eof()
        with anyio.move_on_after(1):
            left = MAX_HEAD
            while left > 0:
                left -= len(await client.receive(left))


async def _answer(
    client: anyio.abc.ByteStream, status: int, message: str, refused: str | None = None
) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout"}
    reasons |= {431: "Request Header Fields Too Large", 502: "Bad Gateway"}
    reasons |= {503: "Service Unavailable"}
    body = (message + "\n").encode()
    head = f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\n"
    head += "Content-Type: text/plain; charset=utf-8\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    if refused:
        head += f"X-Pokeralph-Refused: {refused}\r\n"
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(head.encode() + b"\r\n" + body)


async def _copy(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
    """Bytes from ``source`` to ``sink`` until either fails or ``source`` ends, then close
    both: the other way's pending receive ends cleanly (no cancel of a receive on a raw
    socket, which anyio 4.16 may report as an InvalidStateError when the socket turns
    readable at once). No half-close: HTTP clients do not half-close, and a half-open
    tunnel is one more thing to hold."""
    ended = (OSError, anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
    try:
        while True:
            await sink.send(await source.receive(CHUNK))
    except ended:
        pass
    with anyio.CancelScope(shield=True):
        for stream in (source, sink):
            with contextlib.suppress(*ended):
                await stream.aclose()
