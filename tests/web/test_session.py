"""The dashboard's sessions against a real daemon: a session dies with the daemon and
after ``SESSION_TTL``; the cookie, which browsers also send to other ports of the host,
opens no data without its page key; a login link works once, a restart included; and
``pokeralphctl web --open`` never puts the link in a program's arguments.
"""

from __future__ import annotations

import html
import http.client
import re
import shutil
import socket
import stat
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import websocket

from pokeralph_core.weblink import login_query
from pokeralphd.settings import DaemonSettings
from pokeralphd.web.app import build_app
from pokeralphd.web.auth import SESSION_TTL, Gate, cookie_name
from tests.helpers import run_ctl, short_tmpdir
from tests.inproc import ThreadedDaemon
from tests.web.conftest import WebDaemon, sign_in


def status(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


def login_cookie(port: int, link: str) -> str:
    """The cookie a login link sets, as a Cookie header (whatever the answer's shape)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", link.split(f":{port}", 1)[1], headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.status in (200, 303), response.status
    return response.headers["set-cookie"].split(";")[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ws_status(port: int, path: str = "/ws", **kwargs: Any) -> int:
    """The handshake's status: 101 when it opened (then closed again)."""
    try:
        sock = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=10, **kwargs)
    except websocket.WebSocketBadStatusException as exc:
        return int(exc.status_code)
    sock.close()
    return 101


def test_a_session_and_a_link_from_before_a_restart_are_refused() -> None:
    home = short_tmpdir()
    port = free_port()
    settings = DaemonSettings(web_port=port)
    try:
        first = ThreadedDaemon(home, settings, web=True).start()
        try:
            web = WebDaemon(first, home, home)
            link = web.login_url()
            cookie = login_cookie(port, link)
            assert status(port, "/", {"Cookie": cookie}) == 200
        finally:
            first.stop()
        second = ThreadedDaemon(home, settings, web=True).start()
        try:
            assert WebDaemon(second, home, home).port == port  # the same origin again
            assert status(port, "/", {"Cookie": cookie}) == 401
            assert status(port, link.split(f":{port}", 1)[1]) == 403  # used before: once only
            fresh = web.sign_in()
            assert status(port, "/", {"Cookie": fresh.cookie}) == 200
        finally:
            second.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


class NoData:
    """The web service, for routes that never reach it here."""

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"error": {"message": "not found"}}

    async def serve_websocket(self, websocket: Any) -> None:
        raise AssertionError("no WebSocket here")


@pytest.mark.anyio
async def test_a_session_expires() -> None:
    now = [1_000_000.0]
    secret = b"s" * 64
    gate = Gate(secret, 8123, clock=lambda: now[0])
    app = build_app(NoData(), gate)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as client:
        signed = await client.get(f"/login?{login_query(secret, gate.instance, now=now[0])}")
        assert signed.status_code == 200
        set_cookie = signed.headers["set-cookie"]
        assert set_cookie.startswith(f"{cookie_name(8123)}=")
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/", f"Max-Age={SESSION_TTL}"):
            assert attribute in set_cookie, set_cookie
        headers = {"Cookie": set_cookie.split(";")[0]}
        client.cookies.clear()
        assert (await client.get("/", headers=headers)).status_code == 200
        now[0] += SESSION_TTL - 1
        assert (await client.get("/", headers=headers)).status_code == 200
        now[0] += 1
        assert (await client.get("/", headers=headers)).status_code == 401


def test_the_cookie_alone_opens_no_data(web: WebDaemon) -> None:
    """What a program on another port catches from the browser, the cookie, with any
    header it likes, opens the page's code but neither the socket nor a delivery."""
    session, other = web.sign_in(), web.sign_in()
    port, ours = web.port, web.url.rstrip("/")
    cookie = [f"Cookie: {session.cookie}"]
    assert status(port, "/", {"Cookie": session.cookie}) == 200
    assert ws_status(port, header=cookie, origin=ours) == 403
    assert ws_status(port, "/ws?k=0123abcd", header=cookie, origin=ours) == 403
    assert ws_status(port, f"/ws?k={other.key}", header=cookie, origin=ours) == 403
    with_key = f"/ws?k={session.key}"
    assert ws_status(port, with_key, header=cookie, suppress_origin=True) == 403
    for foreign in ("http://127.0.0.1:3000", "http://localhost:3000", "null"):
        assert ws_status(port, with_key, header=cookie, origin=foreign) == 403, foreign
    assert ws_status(port, with_key, header=cookie, origin=ours) == 101
    delivery = web.call("inbox.create", {"repo": str(web.repo), "title": "x", "mode": "passive"})
    path = f"/content/{web.repo.name}/{delivery['delivery']['id']}"
    assert status(port, path, {"Cookie": session.cookie}) == 401
    assert status(port, f"{path}?k={session.key}", {"Cookie": session.cookie}) == 200


def test_web_open_keeps_the_link_out_of_argv(web: WebDaemon, tmp_path: Path) -> None:
    """The browser is started on a private page that forwards to the link."""
    record = tmp_path / "argv"
    browser = tmp_path / "fake-browser"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{record}'\n")
    browser.chmod(0o755)
    done = run_ctl({**web.daemon.env, "BROWSER": str(browser)}, "web", "--open", process=True)
    assert done.returncode == 0, done.stderr
    assert "opened in your browser" in done.stderr
    argv = record.read_text().splitlines()
    assert len(argv) == 1 and argv[0].startswith("file:///"), argv
    assert "login" not in argv[0] and "?" not in argv[0]
    page = Path(unquote(argv[0].removeprefix("file://")))
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert page.parent == web.daemon.socket.parent
    found = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', page.read_text())
    assert found is not None
    link = html.unescape(found.group(1))
    assert link.startswith(f"{web.url}login?") and link in done.stdout
    assert status(web.port, "/", {"Cookie": sign_in(web.port, link).cookie}) == 200
    assert status(web.port, link.split(f":{web.port}", 1)[1]) == 403  # once only
