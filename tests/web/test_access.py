"""The dashboard's HTTP and WebSocket side against a real daemon, without a browser: who
is let in (token, cookie, Host, Origin, one-time links) and that the WebSocket speaks the
very protocol of the Unix socket (same errors, same bounds, events resumable with since).
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
import websocket

from pokeralph_core.weblink import link_mac, login_query
from pokeralphctl.client import Connection
from pokeralphd.daemon import Daemon
from pokeralphd.settings import DaemonSettings
from pokeralphd.web import service
from pokeralphd.web.auth import Gate, cookie_name, load_or_create_secret
from tests.helpers import short_tmpdir
from tests.inproc import ThreadedDaemon, paths_for
from tests.web.conftest import WebDaemon


def get(
    web: WebDaemon, path: str, headers: dict[str, str] | None = None
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{web.port}", **(headers or {})})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def bearer(web: WebDaemon) -> dict[str, str]:
    return {"Authorization": "Bearer " + web.secret.decode()}


def ws(web: WebDaemon, **kwargs: Any) -> websocket.WebSocket:
    kwargs.setdefault("header", [f"Authorization: Bearer {web.secret.decode()}"])
    kwargs.setdefault("origin", web.url.rstrip("/"))
    return websocket.create_connection(f"ws://127.0.0.1:{web.port}/ws", timeout=10, **kwargs)


def rpc(sock: websocket.WebSocket, method: str, params: Any = None, rid: int = 1) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    sock.send(json.dumps(message))
    while True:
        reply = json.loads(sock.recv())
        if reply.get("id") == rid:
            return reply


def test_files_beside_the_socket_are_private(web: WebDaemon) -> None:
    run = web.daemon.socket.parent
    for name in ("d.web.json", "d.web-token"):
        mode = stat.S_IMODE((run / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
    assert web.info["pid"] == os.getpid()
    assert web.url == f"http://127.0.0.1:{web.port}/"


def test_no_page_without_the_token(web: WebDaemon) -> None:
    assert get(web, "/").status == 401
    assert get(web, "/static/js/app.js").status == 401
    assert get(web, "/", {"Authorization": "Bearer wrong"}).status == 401
    assert get(web, "/", {"Cookie": f"{cookie_name(web.port)}=forged"}).status == 401
    assert get(web, "/", bearer(web)).status == 200


def test_wrong_host_and_foreign_origins_get_nothing(web: WebDaemon) -> None:
    # DNS rebinding: the page's requests name the attacker's host.
    assert get(web, "/", {**bearer(web), "Host": f"evil.example:{web.port}"}).status == 403
    assert get(web, "/", {**bearer(web), "Host": "127.0.0.1:1"}).status == 403
    for origin in ("http://evil.example", f"http://127.0.0.1:{web.port + 1}", "null"):
        assert get(web, "/", {**bearer(web), "Origin": origin}).status == 403, origin
    assert get(web, "/", {**bearer(web), "Origin": web.url.rstrip("/")}).status == 200
    assert get(web, "/", {**bearer(web), "Host": f"localhost:{web.port}"}).status == 200


def test_the_page_is_locked_down(web: WebDaemon) -> None:
    page = get(web, "/", bearer(web))
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"


def test_a_login_link_works_once_and_sets_a_strict_cookie(web: WebDaemon) -> None:
    query = login_query(web.secret, web.info["instance"])
    first = get(web, f"/login?{query}")
    assert first.status == 200  # a page that keeps the page key, then goes on to /
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{cookie_name(web.port)}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert web.secret.decode() not in cookie  # the browser never holds the secret
    value = cookie.split(";")[0]
    assert get(web, "/", {"Cookie": value}).status == 200
    assert get(web, f"/login?{query}").status == 403  # once only
    nonce, past = "abcdefghijkl", int(time.time()) - 1
    mac = link_mac(web.secret, web.info["instance"], nonce, past)
    expired = f"/login?n={nonce}&e={past}&m={mac}"
    assert get(web, expired).status == 403
    assert get(web, "/login?n=abcdefghijkl&e=9999999999&m=00").status == 403


def test_gate_links_unit() -> None:
    now = 1_000_000.0
    secret = b"s" * 64
    gate = Gate(secret, 8080, clock=lambda: now)
    nonce = "n" * 16
    later = int(now) + 3600
    assert not gate.take_link(nonce, str(later), link_mac(secret, gate.instance, nonce, later))
    expiry = int(now) + 60
    assert gate.take_link(nonce, str(expiry), link_mac(secret, gate.instance, nonce, expiry))
    assert not gate.take_link(nonce, str(expiry), link_mac(secret, gate.instance, nonce, expiry))
    assert not gate.take_link("m" * 16, "soon", "x")
    restarted = Gate(secret, 8080, clock=lambda: now)  # a link for the last start
    other = "o" * 16
    assert not restarted.take_link(
        other, str(expiry), link_mac(secret, gate.instance, other, expiry)
    )


def test_a_readable_secret_is_replaced() -> None:
    folder = short_tmpdir()
    path = folder / "s.web-token"
    first = load_or_create_secret(path)
    assert load_or_create_secret(path) == first
    path.chmod(0o644)  # others could have read it
    second = load_or_create_secret(path)
    assert second != first and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_websocket_refused_without_token_or_from_another_origin(web: WebDaemon) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException) as no_token:
        ws(web, header=[])
    assert no_token.value.status_code == 403
    for origin in ("http://evil.example", f"http://localhost:{web.port + 1}", "null"):
        with pytest.raises(websocket.WebSocketBadStatusException) as foreign:
            ws(web, origin=origin)
        assert foreign.value.status_code == 403


def test_the_websocket_speaks_the_same_protocol(web: WebDaemon) -> None:
    sock = ws(web)
    try:
        assert rpc(sock, "daemon.ping")["result"] == "pong"
        assert rpc(sock, "no.such")["error"]["code"] == -32601
        bad = rpc(sock, "task.get", {"taskId": "../x", "repo": str(web.repo)})["error"]
        assert bad["code"] == -32602 and bad["data"]["field"] == "taskId"
        sock.send("{not json")
        assert json.loads(sock.recv())["error"]["code"] == -32700
        sock.send(
            json.dumps([{"jsonrpc": "2.0", "id": i, "method": "daemon.ping"} for i in (7, 8)])
        )
        assert [r["id"] for r in json.loads(sock.recv())] == [7, 8]
        status = web.call("daemon.status")
        assert status["clients"] >= 1
    finally:
        sock.close()


def test_events_resume_with_since_over_the_websocket(web: WebDaemon) -> None:
    sock = ws(web)
    try:
        first = rpc(sock, "events.subscribe")["result"]
        assert first["epoch"] == web.call("daemon.status")["epoch"]
        web.call("inbox.create", {"repo": str(web.repo), "title": "one", "mode": "passive"})
        event = json.loads(sock.recv())
        assert event["method"] == "event" and event["params"]["type"] == "new_delivery"
        seq = event["params"]["seq"]
    finally:
        sock.close()
    web.call("inbox.create", {"repo": str(web.repo), "title": "two", "mode": "passive"})
    again = ws(web)
    try:
        reply = rpc(again, "events.subscribe", {"since": seq, "types": ["new_delivery"]})
        assert reply["result"]["replayed"] == 1 and reply["result"]["lost"] == 0
        missed = json.loads(again.recv())["params"]
        assert missed["seq"] > seq and missed["payload"]["delivery"]["title"] == "two"
    finally:
        again.close()


def test_a_message_past_max_message_is_the_same_error(tmp_path: Path) -> None:
    home = short_tmpdir()
    daemon = ThreadedDaemon(home, DaemonSettings(max_message=1024), web=True).start()
    try:
        web = WebDaemon(daemon, home, home)
        sock = ws(web)
        sock.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": "y" * 2000}))
        error = json.loads(sock.recv())["error"]
        assert error["code"] == -32011 and error["data"]["limit"] == 1024
        with pytest.raises(websocket.WebSocketConnectionClosedException):
            sock.recv()
            sock.recv()
    finally:
        daemon.stop()


def test_no_web_serves_nothing_and_leaves_no_file() -> None:
    home = short_tmpdir()
    daemon = ThreadedDaemon(home, web=False).start()
    try:
        assert not (home / "run" / "d.web.json").exists()
    finally:
        daemon.stop()
    started = ThreadedDaemon(home, web=True).start()
    info = home / "run" / "d.web.json"
    assert info.exists()
    started.stop()
    assert not info.exists()  # removed at shutdown


@pytest.mark.anyio
async def test_the_socket_answers_while_the_dashboard_loads(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the web stack (~0.2 s) happens off the event loop: clients of the socket are
    answered meanwhile, and the daemon is ready once the dashboard is up."""
    loading, release = threading.Event(), threading.Event()
    load = service._import_web_stack

    def held() -> None:
        loading.set()
        release.wait(20)
        load()

    monkeypatch.setattr(service, "_import_web_stack", held)
    paths = paths_for(home)
    daemon = Daemon(paths, None)

    def ping() -> Any:
        with Connection(str(paths.socket), timeout=5) as conn:
            return conn.call("daemon.ping")

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: daemon.run(handle_signals=False))
        try:
            assert await anyio.to_thread.run_sync(loading.wait, 20)
            assert await anyio.to_thread.run_sync(ping) == "pong"
            assert not daemon.ready.is_set()
        finally:
            release.set()
        with anyio.fail_after(20):
            await daemon.ready.wait()
        assert (paths.socket.parent / "d.web.json").exists()
        daemon.shutdown_requested.set()
