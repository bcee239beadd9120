"""``fetch_webpage`` reaches public addresses only (issue 21, hole 8): a private address
named directly, a name that resolves to one, and a redirect to one are refused before
anything connects to them.

Nothing here sends a packet past loopback: names resolve through an injected resolver,
and requests to "public" addresses go to an ``httpx.MockTransport`` that records them.
The loopback server that counts its visitors shows that the refusal comes first.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pokeralph_agent.errors import ToolError
from pokeralph_agent.fetch import Fetcher
from pokeralph_agent.sandbox import Sandbox
from pokeralph_agent.tools import Toolbox

pytestmark = pytest.mark.anyio

PUBLIC = "93.184.215.14"  # a global address; only the mock transport ever "reaches" it
NAMES = {
    "public.example": [PUBLIC],
    "other.example": ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "intranet.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": [PUBLIC, "127.0.0.1"],
    "localhost": ["127.0.0.1", "::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "nat64.example": ["64:ff9b::a9fe:a9fe"],  # 169.254.169.254 through NAT64
}


async def resolve(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError(f"[Errno -2] Name or service not known: {host}")
    return NAMES[host]


class Loopback:
    """A real HTTP server on 127.0.0.1 that counts who reaches it."""

    def __init__(self) -> None:
        visits = self.visits = [0]

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                visits[0] += 1
                body = b"secret of the loopback"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback()
    yield server
    server.close()


class Web:
    """The "internet" of these tests: ``routes`` maps Host + path to a response; every
    request that got this far is recorded."""

    def __init__(self, routes: dict[str, httpx.Response]) -> None:
        self.routes = routes
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        key = request.headers["host"] + request.url.path
        return self.routes.get(key, httpx.Response(404, text="no such page"))


def redirect(location: str) -> httpx.Response:
    return httpx.Response(302, headers={"location": location})


def box(tmp_path: Path, web: Web) -> Toolbox:
    fetcher = Fetcher(timeout=10, resolve=resolve, transport=httpx.MockTransport(web))
    return Toolbox(Sandbox(tmp_path), fetch_enabled=True, fetcher=fetcher)


async def test_loopback_named_directly_is_refused(tmp_path: Path, loopback: Loopback) -> None:
    tools = Toolbox(Sandbox(tmp_path), fetch_enabled=True)  # the real resolver and transport
    for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "localhost", "0.0.0.0"):
        with pytest.raises(ToolError, match="refused") as refused:
            await tools.run("fetch_webpage", {"url": f"http://{host}:{loopback.port}/"})
        assert host.strip("[]") in str(refused.value)
    assert loopback.visits == [0]


async def test_private_addresses_named_directly_are_refused(tmp_path: Path) -> None:
    web = Web({})
    tools = box(tmp_path, web)
    for url, why in (
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("https://192.168.1.1/", "private"),
        ("http://100.64.0.1/", "non-public"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[::]/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
    ):
        with pytest.raises(ToolError, match=f"refused .*a {why} address") as refused:
            await tools.run("fetch_webpage", {"url": url})
        assert httpx.URL(url).host in str(refused.value), refused.value
    assert web.seen == []


async def test_a_name_resolving_to_a_private_address_is_refused(tmp_path: Path) -> None:
    web = Web({})
    tools = box(tmp_path, web)
    for name, shown in (
        ("intranet.example", "10.1.2.3"),
        ("metadata.example", "169.254.169.254"),
        ("mixed.example", "127.0.0.1"),  # one bad answer is enough
        ("mapped.example", "::ffff:127.0.0.1"),
        ("nat64.example", "64:ff9b::a9fe:a9fe"),
    ):
        with pytest.raises(ToolError, match=f"refused {name} \\({shown}\\)"):
            await tools.run("fetch_webpage", {"url": f"http://{name}/"})
    with pytest.raises(ToolError, match=r"cannot resolve nowhere\.example"):
        await tools.run("fetch_webpage", {"url": "http://nowhere.example/"})
    assert web.seen == []


async def test_redirects_to_private_hosts_are_refused(tmp_path: Path, loopback: Loopback) -> None:
    targets = [
        f"http://127.0.0.1:{loopback.port}/",
        f"http://localhost:{loopback.port}/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/admin",
        "http://intranet.example/",
    ]
    for target in targets:
        web = Web(
            {
                "public.example/start": redirect("https://other.example/next"),
                "other.example/next": redirect(target),
            }
        )
        with pytest.raises(ToolError, match="refused") as refused:
            await box(tmp_path, web).run("fetch_webpage", {"url": "http://public.example/start"})
        assert httpx.URL(target).host in str(refused.value)
        assert [r.headers["host"] for r in web.seen] == ["public.example", "other.example"]
    assert loopback.visits == [0]


async def test_the_request_goes_to_the_vetted_address(tmp_path: Path) -> None:
    """Pinned: the connection is to the address checked, the name kept for Host and SNI
    (so a second DNS answer cannot move it)."""
    web = Web({"other.example/page": httpx.Response(200, html="<p>hello &amp; bye</p>")})
    web.routes["public.example/"] = redirect("https://other.example/page")
    done = await box(tmp_path, web).run("fetch_webpage", {"url": "http://public.example/"})
    assert done.success and "hello & bye" in done.output
    first, second = web.seen
    assert first.url.host == PUBLIC and first.url.scheme == "http"
    assert second.url.host == "2606:2800:21f:cb07:6820:80da:af6b:8b2c"
    assert second.headers["host"] == "other.example"
    assert second.extensions["sni_hostname"] == "other.example"


async def test_redirects_are_bounded_and_stay_on_http(tmp_path: Path) -> None:
    web = Web({"public.example/loop": redirect("/loop")})
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await box(tmp_path, web).run("fetch_webpage", {"url": "http://public.example/loop"})
    assert len(web.seen) == 6
    web = Web({"public.example/": redirect("file:///etc/passwd")})
    with pytest.raises(ToolError, match="only http and https"):
        await box(tmp_path, web).run("fetch_webpage", {"url": "http://public.example/"})
