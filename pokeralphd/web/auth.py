"""Who may use the dashboard: the per-user secret, the one-time login link, the session
and its page key, and the ``Host`` and ``Origin`` checks.

Every HTTP request and every WebSocket handshake must carry a session (set by ``/login``
from a one-time link, see :mod:`pokeralph_core.weblink`) or ``Authorization: Bearer
<secret>`` (scripts). ``Host`` must name the loopback address and port we bound
(``127.0.0.1:PORT`` or ``localhost:PORT``), so a DNS-rebinding page, whose requests carry
its own host name, gets nothing. An ``Origin`` header, when present, must be ours: pages of
other sites and of other ports on this machine (cookies are not kept apart by port, so
SameSite alone would let them in) are refused, and so is ``Origin: null``, the origin of
the sandboxed frames that show delivered HTML.

A session is a signed cookie, ``pokeralph_session_PORT`` (``HttpOnly``,
``SameSite=Strict``, ``Path=/``), holding its issue time and expiry (:data:`SESSION_TTL`)
under a key made at each start of the daemon and never written: a restart ends every
session, and the cookie holds nothing that can mint login links.

Browsers send that cookie to every port of ``127.0.0.1``, a dev server an agent started
included, and a local program holding it can forge any header. So the cookie alone opens
only the page and its static files (public code). The WebSocket, where everything is read
and changed, and a delivery's content also need the session's *page key*: an HMAC of the
cookie that ``/login`` hands to the page in its body, once, and that the page keeps in
``localStorage``, which browsers keep apart per origin (port included) and never send
anywhere; the page sends it in the ``k`` query parameter. A WebSocket opened with a
session must also come with our own ``Origin`` (browsers always send one). What is left:
a program that can read the user's browser profile, or the secret file, is the user.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from typing import TYPE_CHECKING

from pokeralph_core.weblink import LINK_TTL, link_mac

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

COOKIE = "pokeralph_session"  # the prefix; the name carries the port (cookie_name)
SESSION_TTL = 12 * 3600  # seconds a session lasts, from its login
MAX_NONCES = 4096  # login links remembered as used until they expire


def cookie_name(port: int) -> str:
    """The session cookie of the dashboard on ``port`` (two daemons' never collide)."""
    return f"{COOKIE}_{port}"


def load_or_create_secret(path: Path) -> bytes:
    """The per-user secret in ``path`` (0600, ours); made anew when missing, and replaced
    when others could read it (it may have leaked) or it is not a plain file of ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        pass
    except OSError:
        path.unlink(missing_ok=True)  # a link, or worse: never follow it
    else:
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            secret = file.read(4096).strip()
        if info.st_uid == os.getuid() and not info.st_mode & 0o077 and len(secret) >= 32:
            return secret
        path.unlink(missing_ok=True)
    secret = secrets.token_hex(32).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(secret + b"\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    return secret


class Gate:
    """The checks every request passes (see the module doc). ``clock`` gives the wall
    time (tests pass their own); the session key is made here, once per daemon start."""

    def __init__(self, secret: bytes, port: int, *, clock: Callable[[], float] = time.time) -> None:
        self.secret = secret
        self.port = port
        self.clock = clock
        self.instance = secrets.token_hex(8)  # this start's: links name it (weblink)
        self.cookie = cookie_name(port)
        self._key = secrets.token_bytes(32)  # this start's: never written anywhere
        self._bearer = b"Bearer " + secret
        self.hosts = frozenset(f"{name}:{port}" for name in ("127.0.0.1", "localhost"))
        self.origins = frozenset(f"http://{host}" for host in self.hosts)
        self._used: dict[str, int] = {}  # nonce -> expiry

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None) -> bool:
        """No Origin (a navigation, a script) or ours; anything else, ``null`` included, no."""
        return origin is None or origin.lower() in self.origins

    def bearer_ok(self, authorization: bytes | None) -> bool:
        return authorization is not None and hmac.compare_digest(authorization, self._bearer)

    # -- sessions
    def _mac(self, purpose: str, text: str) -> str:
        return hmac.new(self._key, f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        """A fresh session cookie's value: ``ISSUED.EXPIRES.NONCE.MAC``."""
        issued = int(self.clock())
        body = f"{issued}.{issued + SESSION_TTL}.{secrets.token_hex(8)}"
        return f"{body}.{self._mac('session', body)}"

    def session_ok(self, value: str | None) -> bool:
        """A session of this start of the daemon, not yet expired."""
        if value is None or len(value) > 200:
            return False
        body, _, mac = value.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._mac("session", body).encode()):
            return False
        issued, expires, _nonce = body.split(".")  # ours: signed
        return int(issued) <= self.clock() < int(expires)

    def page_key(self, session: str) -> str:
        """The session's page key (see the module doc): given once, by ``/login``."""
        return self._mac("page", session)

    def page_key_ok(self, session: str | None, key: str | None) -> bool:
        """A live session and its own page key."""
        if session is None or key is None or not self.session_ok(session):
            return False
        return hmac.compare_digest(key.encode(), self.page_key(session).encode())

    # -- login links
    def take_link(self, nonce: str, expires: str, mac: str) -> bool:
        """True once for a genuine, unexpired login link minted for this start of the
        daemon (its :attr:`instance`); never again for its nonce."""
        now = self.clock()
        try:
            expiry = int(expires)
        except ValueError:
            return False
        if not (now < expiry <= now + LINK_TTL + 5) or not 8 <= len(nonce) <= 64:
            return False
        good = link_mac(self.secret, self.instance, nonce, expiry)
        if not hmac.compare_digest(mac.encode(), good.encode()):
            return False
        used = self._used
        if len(used) >= MAX_NONCES:
            for old in [n for n, e in used.items() if e <= now]:
                del used[old]
            if len(used) >= MAX_NONCES:
                return False  # a flood of genuine links: nobody but the user can mint them
        if nonce in used:
            return False
        used[nonce] = expiry
        return True
