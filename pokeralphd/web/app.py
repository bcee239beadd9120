"""The dashboard's HTTP side (a Starlette app): the page and its assets, the login link,
the sandboxed content of delivered HTML, and the WebSocket that speaks the protocol.

There is no second API here: everything the page shows or changes goes through JSON-RPC
on ``/ws``, to the same dispatcher as the Unix socket. The HTTP routes only serve files,
turn a one-time login link into a session cookie, and show a delivery's HTML where it
can do no harm.

Every request passes :class:`Guard` first (loopback ``Host``, our ``Origin`` or none, a
session or the bearer secret; the WebSocket and a delivery's content also the session's
page key, and the WebSocket our own ``Origin``; see :mod:`pokeralphd.web.auth`), and every
response carries a Content-Security-Policy: the page may load only its own scripts and
styles and connect only to itself; delivered HTML is served with ``sandbox`` (no scripts,
an opaque origin that cannot reach the page, the cookie or the socket) and
``default-src 'none'``.

``/login`` answers a good link with a small page, not a redirect: it sets the session
cookie, and ``login.js`` moves the page key from the body into ``localStorage`` and goes
on to ``/``. The key is never in a URL the browser keeps.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from pokeralphd.web.auth import SESSION_TTL

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from starlette.websockets import WebSocket

    from pokeralphd.web.auth import Gate

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws://{host}; frame-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
#: Delivered HTML: no scripts, no requests, an opaque origin; inline styles and data: images.
CONTENT_CSP = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; media-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'"
)
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

REFUSED = """<!doctype html><meta charset="utf-8"><title>pokeralph: not signed in</title>
<body style="font:16px system-ui;margin:3em"><h1>Not signed in</h1>
<p>{why}</p><p>Open the dashboard with <code>pokeralphctl web --open</code>, or print a
fresh one-time link with <code>pokeralphctl web</code>.</p></body>"""

#: The answer to a good login link: login.js stores the key and goes on to the page.
SIGNED_IN = """<!doctype html><meta charset="utf-8"><title>pokeralph: signing in</title>
<meta name="pokeralph-key" content="{key}">
<script type="module" src="/static/js/login.js"></script>
<body><p>Signing in…</p></body>"""
LOGIN_CSP = "default-src 'none'; script-src 'self'; base-uri 'none'; form-action 'none'"


class WebHost(Protocol):
    """What the routes need of the web service (:class:`pokeralphd.web.service.WebService`)."""

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...

    async def serve_websocket(self, websocket: WebSocket) -> None: ...


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            value_: bytes = value
            return value_
    return None


def _query(scope: Scope, name: str) -> str | None:
    """One parameter of the query string (the page key: URL-safe as it is, hex)."""
    raw: bytes = scope.get("query_string", b"")
    for part in raw.decode("latin-1").split("&"):
        key, _, value = part.partition("=")
        if key == name:
            return value
    return None


#: What the page key guards besides the WebSocket: a delivery's content.
KEYED_PREFIXES = ("/ws", "/content/")


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if raw is None:
        return None
    for part in raw.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class Guard:
    """Pure ASGI middleware: the checks of :mod:`pokeralphd.web.auth` before any route,
    and the security headers on every response."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind not in ("http", "websocket"):
            return
        gate = self.gate
        host = _header(scope, b"host")
        origin = _header(scope, b"origin")
        why = None
        if not gate.host_ok(host.decode("latin-1") if host is not None else None):
            why = "This address is not the dashboard's (wrong Host)."
        elif not gate.origin_ok(origin.decode("latin-1") if origin is not None else None):
            why = "Requests from other pages are refused (foreign Origin)."
        elif scope["path"] != "/login" and not self._authorized(scope, kind, origin):
            why = "This browser has no dashboard session (or an old one)."
        if why is not None:
            log.info("web: refused %s %s: %s", kind, scope["path"], why)
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "forbidden"})
                return
            status = 401 if why.startswith("This browser") else 403
            await HTMLResponse(REFUSED.format(why=why), status)(scope, receive, _secured(send))
            return
        await self.app(scope, receive, _secured(send) if kind == "http" else send)

    def _authorized(self, scope: Scope, kind: str, origin: bytes | None) -> bool:
        """The bearer secret, or a session; with its page key where the data is, and for
        a WebSocket our own Origin (a browser's handshake always has one)."""
        gate = self.gate
        if gate.bearer_ok(_header(scope, b"authorization")):
            return True
        session = _cookie(scope, gate.cookie)
        if kind == "websocket" or scope["path"].startswith(KEYED_PREFIXES):
            if kind == "websocket" and origin is None:
                return False
            return gate.page_key_ok(session, _query(scope, "k"))
        return gate.session_ok(session)


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop (the daemon owns everything): answer at once, so that
    shutdown never waits on the app."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _secured(send: Send) -> Send:
    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            names = {key for key, _ in headers}
            headers += [item for item in COMMON_HEADERS if item[0] not in names]
            if b"cache-control" not in names:
                headers.append((b"cache-control", b"no-store"))
            if b"content-security-policy" not in names:
                headers.append((b"content-security-policy", b"default-src 'none'"))
                headers.append((b"x-frame-options", b"DENY"))
            message["headers"] = headers
        await send(message)

    return secured


def build_app(web: WebHost, gate: Gate) -> ASGIApp:
    index = (STATIC / "index.html").read_bytes()

    async def page(request: Request) -> Response:
        host = request.headers["host"]  # checked by the guard
        return Response(
            index,
            media_type="text/html; charset=utf-8",
            headers={
                "content-security-policy": PAGE_CSP.format(host=host),
                "x-frame-options": "DENY",
            },
        )

    async def login(request: Request) -> Response:
        query = request.query_params
        if not gate.take_link(query.get("n", ""), query.get("e", ""), query.get("m", "")):
            why = "This login link is not valid, expired or was already used."
            return HTMLResponse(REFUSED.format(why=why), 403)
        session = gate.new_session()
        response = HTMLResponse(
            SIGNED_IN.format(key=gate.page_key(session)),
            headers={"content-security-policy": LOGIN_CSP, "x-frame-options": "DENY"},
        )
        response.set_cookie(
            gate.cookie, session, httponly=True, samesite="strict", path="/", max_age=SESSION_TTL
        )
        return response

    async def content(request: Request) -> Response:
        """A delivery's HTML, for the sandboxed frame of the inbox view."""
        params = {"repo": request.path_params["repo"], "id": request.path_params["id"]}
        reply = await web.call("inbox.get", params)
        result: dict[str, Any] | None = reply.get("result")
        if result is None:
            message = str(reply.get("error", {}).get("message", "not found"))
            return Response(message, 404, media_type="text/plain; charset=utf-8")
        body = result["delivery"]["content"]
        kind = "text/html" if body.get("type") == "html" else "text/plain"
        return Response(
            body.get("body", ""),
            media_type=f"{kind}; charset=utf-8",
            headers={
                "content-security-policy": CONTENT_CSP,
                "x-frame-options": "SAMEORIGIN",
            },
        )

    async def socket(websocket: WebSocket) -> None:
        await web.serve_websocket(websocket)

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/login", login),
            Route("/content/{repo}/{id}", content),
            WebSocketRoute("/ws", socket),
            Mount("/static", StaticFiles(directory=STATIC)),
        ]
    )
    return Guard(app, gate)
