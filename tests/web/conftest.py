from __future__ import annotations

import http.client
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pokeralph_core.weblink import info_path, login_query, token_path
from pokeralphctl.commands.demo import make_sample
from pokeralphctl.terminal import Terminal
from pokeralphd.store.ledger import Ledger, LedgerEntry
from tests.helpers import short_tmpdir
from tests.inproc import ThreadedDaemon, paths_for


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


#: What the spend charts draw: (days ago, repository, task, cost, input, output tokens).
SPENT = [
    (3, "demo", "001-word-count", 0.42, 12_000, 3_000),
    (3, "webapp", "002-login-form", 1.25, 40_000, 9_500),
    (2, "webapp", "002-login-form", 0.8, 25_000, 6_000),
    (2, "webapp", "003-a-task-with-a-rather-long-id-x", 0.05, 2_000, 400),
    (1, "demo", "001-word-count", 0.3, 9_000, 2_000),
    (1, "webapp", "002-login-form", 2.1, 61_000, 15_000),
    (1, "webapp", "002-login-form", 0.15, 5_000, 1_000),
]


def seed_ledger(home: Path) -> None:
    """A week's spend of two repositories in the ledger (before the daemon reads it)."""
    ledger = Ledger(paths_for(home).state_dir / "ledger")
    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    for number, (ago, repo, task, cost, sent, got) in enumerate(SPENT, start=1):
        ledger.append(
            LedgerEntry(
                at=now - timedelta(days=ago),
                repo=repo,
                task_id=task,
                attempt=1,
                iteration=number,
                backend="claude",
                model="claude-sonnet-4-5",
                cost_usd=cost,
                tokens={"inputTokens": sent, "outputTokens": got},
            )
        )


@pytest.fixture(scope="module")
def web() -> Iterator[WebDaemon]:
    home = short_tmpdir()
    seed_ledger(home)
    daemon = ThreadedDaemon(home, web=True).start()
    try:
        yield WebDaemon(daemon, home, demo_repo(daemon, home / "demo"))
    finally:
        daemon.stop()
        import shutil

        shutil.rmtree(home, ignore_errors=True)
