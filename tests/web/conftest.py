from __future__ import annotations

import http.client
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.commands.demo import make_sample
from pokeralphctl.terminal import Terminal
from pokeralphctl.weblink import info_path, login_query, token_path
from tests.helpers import short_tmpdir
from tests.inproc import ThreadedDaemon


@dataclass
class WebDaemon:
    """A daemon in this process with its dashboard, and a demo repository."""

    daemon: ThreadedDaemon
    home: Path
    repo: Path

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(Path(info_path(str(self.daemon.socket))).read_text())
        return info

    @property
    def url(self) -> str:
        return str(self.info["url"])

    @property
    def port(self) -> int:
        return int(self.info["port"])

    @property
    def secret(self) -> bytes:
        return Path(token_path(str(self.daemon.socket))).read_bytes().strip()

    def login_url(self) -> str:
        return f"{self.url}login?{login_query(self.secret, self.info['instance'])}"

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.daemon.call(method, params)

    def sign_in(self, link: str | None = None) -> Session:
        """Follow a one-time login link (a fresh one by default) as a browser would."""
        return sign_in(self.port, link or self.login_url())


@dataclass
class Session:
    """What a browser keeps from ``/login``: the cookie, and the page key from the body."""

    cookie: str  # "name=value", as a Cookie header
    key: str


def sign_in(port: int, link: str) -> Session:
    path = link.split(f"127.0.0.1:{port}", 1)[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    assert response.status == 200, (response.status, body)
    key = re.search(r'name="pokeralph-key" content="([0-9a-f]+)"', body)
    assert key is not None, body
    return Session(response.headers["set-cookie"].split(";")[0], key.group(1))


def demo_repo(daemon: ThreadedDaemon, target: Path, mode: str = "hitl") -> Path:
    """The demo sample registered with the demo agent (no account, no network)."""
    prd = make_sample(Terminal.of_process(), target)
    daemon.call("repo.register", {"path": str(target)})
    daemon.call("prd.update", {"repo": str(target), "prd": prd})
    daemon.call(
        "config.update",
        {
            "repo": str(target),
            "patch": {
                # at full speed: its pause between events is for people watching
                "agent": {"backend": "demo", "extraArgs": ["--pace", "0"]},
                "mode": mode,
                "maxIterationsPerTask": 5,
                "feedbackLoops": ["test"],
                "feedbackCommands": {"test": f"{sys.executable} -m unittest -q"},
            },
        },
    )
    return target


@pytest.fixture(scope="module")
def web() -> Iterator[WebDaemon]:
    home = short_tmpdir()
    daemon = ThreadedDaemon(home, web=True).start()
    try:
        yield WebDaemon(daemon, home, demo_repo(daemon, home / "demo"))
    finally:
        daemon.stop()
        import shutil

        shutil.rmtree(home, ignore_errors=True)
