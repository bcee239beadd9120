"""Who may use the dashboard: the per-user secret, the one-time login link, the session
cookie, and the ``Host`` and ``Origin`` checks.

Every HTTP request and every WebSocket handshake must carry the session cookie (set by
``/login`` from a one-time link, see :mod:`pokeralphctl.weblink`) or ``Authorization:
Bearer <secret>`` (scripts). ``Host`` must name the loopback address and port we bound
(``127.0.0.1:PORT`` or ``localhost:PORT``), so a DNS-rebinding page, whose requests carry
its own host name, gets nothing. An ``Origin`` header, when present, must be ours: pages of
other sites and of other ports on this machine (cookies are not kept apart by port, so
SameSite alone would let them in) are refused, and so is ``Origin: null``, the origin of
the sandboxed frames that show delivered HTML.

The cookie holds an HMAC of the secret, not the secret: what a browser keeps can open the
dashboard but cannot mint login links.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from typing import TYPE_CHECKING

from pokeralphctl.weblink import LINK_TTL, link_mac

if TYPE_CHECKING:
    from pathlib import Path

COOKIE = "pokeralph_session"
MAX_NONCES = 4096  # login links remembered as used until they expire


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
    """The checks every request passes (see the module doc)."""

    def __init__(self, secret: bytes, port: int) -> None:
        self.secret = secret
        self.port = port
        self.cookie = hmac.new(secret, b"session", hashlib.sha256).hexdigest()
        self._bearer = b"Bearer " + secret
        self.hosts = frozenset(f"{name}:{port}" for name in ("127.0.0.1", "localhost"))
        self.origins = frozenset(f"http://{host}" for host in self.hosts)
        self._used: dict[str, int] = {}  # nonce -> expiry

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None) -> bool:
        """No Origin (a navigation, a script) or ours; anything else, ``null`` included, no."""
        return origin is None or origin.lower() in self.origins

    def authorized(self, cookie: str | None, authorization: bytes | None) -> bool:
        if cookie is not None and hmac.compare_digest(cookie.encode(), self.cookie.encode()):
            return True
        return authorization is not None and hmac.compare_digest(authorization, self._bearer)

    def take_link(self, nonce: str, expires: str, mac: str, now: float | None = None) -> bool:
        """True once for a genuine, unexpired login link; never again for its nonce."""
        now = time.time() if now is None else now
        try:
            expiry = int(expires)
        except ValueError:
            return False
        if not (now < expiry <= now + LINK_TTL + 5) or not 8 <= len(nonce) <= 64:
            return False
        if not hmac.compare_digest(mac.encode(), link_mac(self.secret, nonce, expiry).encode()):
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
