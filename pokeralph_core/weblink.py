"""The dashboard's link: where the daemon writes its address and secret, and the
one-time login link a client hands to a browser. Standard library only (``pokeralphctl
web`` runs it; the daemon checks links with the same functions).

Beside the socket ``pokeralphd.sock`` the daemon keeps ``pokeralphd.web.json`` (the URL,
port, pid and this start's instance id; 0600) and ``pokeralphd.web-token`` (the per-user
secret; 0600). A client that can read the secret mints a login link
``/login?n=NONCE&e=EXPIRY&m=MAC``: the MAC is an HMAC-SHA256 of the instance, the nonce
and the expiry under the secret, so the secret itself never appears in a URL, a shell
history or a browser history; the daemon takes each nonce once, only before its expiry
(:data:`LINK_TTL` seconds) and only for its own start, then opens a session.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time

LINK_TTL = 120  # seconds a login link stays usable (once)


def info_path(socket: str) -> str:
    """``…/pokeralphd.web.json``: the dashboard's URL, port, the daemon's pid and the
    instance id of its start."""
    return _beside(socket, ".web.json")


def token_path(socket: str) -> str:
    """``…/pokeralphd.web-token``: the per-user secret the dashboard asks for."""
    return _beside(socket, ".web-token")


def opener_path(socket: str) -> str:
    """``…/pokeralphd.web-open.html``: the private page that forwards to a login link."""
    return _beside(socket, ".web-open.html")


def write_opener(path: str, url: str) -> str:
    """Write the forwarding page to ``url`` at ``path`` (0600, replaced whole: a link
    or a file of someone else's there is replaced, never followed); its ``file://`` URL."""
    import contextlib
    import html
    from urllib.parse import quote

    quoted = html.escape(url, quote=True)
    page = (
        '<!doctype html><meta charset="utf-8"><title>pokeralph</title>\n'
        f'<meta http-equiv="refresh" content="0;url={quoted}">\n'
        f'<p>Opening the dashboard&hellip; <a href="{quoted}">go on</a> if nothing happens.\n'
    )
    head, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(page)
    os.replace(tmp, os.path.join(head, name))
    return "file://" + quote(os.path.join(head, name))


def _beside(socket: str, suffix: str) -> str:
    head, name = os.path.split(socket)
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return os.path.join(head, stem + suffix)


def link_mac(secret: bytes, instance: str, nonce: str, expires: int) -> str:
    """The MAC of a link for the daemon's start ``instance`` (in the info file): a link
    minted for an earlier start, used or not, is no good after a restart."""
    text = f"login:{instance}:{nonce}:{expires}"
    return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()


def login_query(secret: bytes, instance: str, now: float | None = None, ttl: int = LINK_TTL) -> str:
    """The query string of a fresh one-time login link."""
    nonce = secrets.token_urlsafe(16)
    expires = int(now if now is not None else time.time()) + ttl
    return f"n={nonce}&e={expires}&m={link_mac(secret, instance, nonce, expires)}"


def read_secret(path: str) -> bytes:
    """The secret, refused unless it is a regular file of ours that only we may read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise PermissionError(f"{path} must be yours and private (mode 0600)")
        return os.read(fd, 4096).strip()
    finally:
        os.close(fd)
