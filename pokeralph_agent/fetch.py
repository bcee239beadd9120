"""``fetch_webpage``'s way out: to public addresses only, whatever a redirect or a DNS
answer says.

A URL's host is resolved here (``resolve`` is a parameter: tests pass their own), and
every address of the answer must be a public one: loopback, private, link-local (the
cloud's metadata service at 169.254.169.254), shared, reserved, multicast and
unspecified addresses are refused, IPv4 ones also when mapped into IPv6 or NAT64. The
request then goes to the vetted address itself, the URL's host kept in ``Host`` and,
for https, in SNI and the certificate's check, so an answer that changes between the
check and the connection (DNS rebinding) cannot move it. Redirects are followed here, at
most :data:`MAX_REDIRECTS`, each hop resolved and checked the same way before anything
connects to it; each hop has a client of its own (a pooled connection is never reused
for another host name). Proxies of the environment are not used: the request goes to
the vetted address.

A refusal is a :class:`ToolError` naming the host, the address and why. What is read is
bounded by :data:`MAX_FETCH` bytes, and each step by the timeout.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from pokeralph_agent.errors import ToolError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import httpx

    #: host, port -> the addresses the name resolves to
    Resolver = Callable[[str, int], Awaitable[list[str]]]

MAX_FETCH = 2 << 20  # bytes of a page kept
MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system's resolver."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def refusal(address: Address) -> str | None:
    """Why ``address`` may not be fetched (a few words), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped
        if inner is None and address in NAT64:
            inner = ipaddress.IPv4Address(address.packed[-4:])
        if inner is not None:
            return refusal(inner)
    for test, why in (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "non-public"),
    ):
        if test:
            return why
    return None


@dataclass
class Fetched:
    url: str  # the last hop's
    status: int
    content_type: str
    data: bytes


@dataclass
class Fetcher:
    """GETs a page from the public internet (see the module doc)."""

    timeout: float = 30.0
    resolve: Resolver = field(default=system_resolve)
    #: the HTTP transport (tests pass ``httpx.MockTransport``); httpx's own by default
    transport: httpx.AsyncBaseTransport | None = None

    async def vet(self, url: httpx.URL) -> str:
        """The address to connect to for ``url``: its host's, all of them public."""
        host = url.host
        if not host:
            raise ToolError(f"{url} names no host")
        port = url.port or (443 if url.scheme == "https" else 80)
        answers = await self._answers(host, port)
        for text, address in answers:
            why = refusal(address)
            if why is not None:
                shown = host if text == host else f"{host} ({text})"
                raise ToolError(
                    f"fetch_webpage refused {shown}: a {why} address; only public "
                    "addresses are fetched"
                )
        return str(answers[0][1])

    async def _answers(self, host: str, port: int) -> list[tuple[str, Address]]:
        """``host``'s addresses (itself if it is one), each with its text as answered."""
        try:
            return [(host, ipaddress.ip_address(host))]
        except ValueError:
            pass  # a name
        try:
            with anyio.fail_after(self.timeout):
                found = await self.resolve(host, port)
        except (OSError, TimeoutError) as exc:
            raise ToolError(f"fetch_webpage cannot resolve {host}: {exc}") from None
        if not found:
            raise ToolError(f"fetch_webpage cannot resolve {host}: no address")
        answers: list[tuple[str, Address]] = []
        for text in found:
            try:
                answers.append((text, ipaddress.ip_address(text.split("%", 1)[0])))
            except ValueError:
                raise ToolError(f"{host} resolves to {text!r}, not an address") from None
        return answers

    async def get(self, url: str) -> Fetched:
        import httpx

        target = httpx.URL(url)
        for _hop in range(MAX_REDIRECTS + 1):
            if target.scheme not in ("http", "https"):
                raise ToolError(f"fetch_webpage follows only http and https, not {target}")
            address = await self.vet(target)
            extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
            async with httpx.AsyncClient(
                timeout=self.timeout, trust_env=False, transport=self.transport
            ) as client:
                request = client.build_request(
                    "GET",
                    target.copy_with(host=address),
                    headers={"Host": target.netloc.decode("ascii")},
                    extensions=extensions,
                )
                response = await client.send(request, stream=True)
                try:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECTS and location:
                        target = target.join(location)
                        continue
                    data = bytearray()
                    async for chunk in response.aiter_bytes():
                        data.extend(chunk)
                        if len(data) > MAX_FETCH:
                            break
                    kind = response.headers.get("content-type", "")
                    return Fetched(str(target), response.status_code, kind, bytes(data))
                finally:
                    await response.aclose()
        raise ToolError(f"fetching {url} failed: more than {MAX_REDIRECTS} redirects")
