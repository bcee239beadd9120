"""Battles in the sandbox (issue 23), end to end: a real daemon, a real subprocess agent
(tests/fakes/sandbox_probe as the command backend) and its feedback loop (the same probe),
confined by real bubblewrap.

Each of them tries to read a planted ``~/.ssh/id_rsa``; to write the home, the host's
/tmp, another registered repository, ``.git/hooks``, ``.git/config`` and
``.pokeralph/``; to reach the daemon's main socket and web token; to deliver through its
own socket (works) and to add a rule through it (refused); and to fetch from a local
HTTP server that is not on the allowlist: the agent's first try becomes an inbox item a
person denies (the refusal names the host and the key, in the run and in the
iteration's log), its second one a person allows always (a rule), and the loop's goes
through by that rule.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from pokeralph_core.weblink import token_path
from pokeralphd.sandbox import bwrap, probe
from tests.helpers import FAKES, make_git_repo, run_ctl
from tests.inproc import Client, InProcDaemon, running_daemon, setup_task

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}"),
]
BODY = "hello from the host"


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        data = BODY.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A local HTTP server (on the host's loopback: not the run's) and its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


async def _permission_item(watcher: Client, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The next inbox item that asks for a permission (deliveries of the runs' own are
    skipped); the events on the way go to ``seen``."""
    while True:
        events = await watcher.events_until({"new_delivery"})
        seen += events
        for event in events:
            if event["type"] == "new_delivery":
                delivery: dict[str, Any] = event["payload"]["delivery"]
                if delivery["title"].startswith("May "):
                    return delivery


async def test_a_battle_and_its_loop_stay_in_their_sandbox(home: Path, server: str) -> None:
    user = home / "user"
    (user / ".ssh").mkdir(parents=True)
    key = user / ".ssh" / "id_rsa"
    key.write_text("PRIVATE KEY\n")
    repo = make_git_repo(home / "repo")
    other = make_git_repo(home / "other")
    git_config = (repo / ".git" / "config").read_text()
    host_tmp = f"/tmp/pokeralph-probe-{uuid.uuid4().hex}"
    port = server.rsplit(":", 1)[1].strip("/")
    target = f"127.0.0.1:{port}"
    async with running_daemon(home, sandbox=True) as d:
        token = Path(token_path(str(d.paths.socket)))
        token.write_text("web-token-secret\n")
        await d.call("repo.register", {"path": str(other)})
        facts = {
            "key": str(key),
            "home": str(user),
            "tmp": host_tmp,
            "other": str(other),
            "socket": str(d.paths.socket),
            "token": str(token),
            "ctl": str(Path(sys.executable).with_name("pokeralphctl")),
            "repo": str(repo),
            "url": server,
            "fetches": {"agent": 2, "loop": 1},
        }
        probe_env = {"SANDBOX_PROBE": json.dumps(facts)}
        loop = f"SANDBOX_PROBE={shlex.quote(json.dumps(facts))} {FAKES / 'sandbox_probe'} loop"
        task = await setup_task(
            d,
            repo,
            {"backend": "command", "command": str(FAKES / "sandbox_probe"), "env": probe_env},
            feedbackCommands={"test": loop},
            autoCommit=False,
            phases=["implementation"],
        )
        await d.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"HOME": str(user)}}}},
        )
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            seen: list[dict[str, Any]] = []
            first = await _permission_item(watcher, seen)
            assert first["title"] == f"May {task} connect to {target}?"
            await d.call("inbox.answer", {"id": first["id"], "values": {"value": "deny"}})
            second = await _permission_item(watcher, seen)
            await d.call("inbox.answer", {"id": second["id"], "values": {"value": "allow_always"}})
            events = seen + await watcher.events_until({"battle_complete", "battle_failed"})
        assert events[-1]["type"] == "battle_complete", events[-1]
        history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
        deliveries = await d.call("inbox.list", {})
        rules = await d.call("rules.list", {"repo": str(repo)})
        await _check_status(d)

    agent = json.loads((repo / "probe-agent.json").read_text())
    looped = json.loads((repo / "probe-loop.json").read_text())
    for who, tried in (("agent", agent), ("loop", looped)):
        # the home and /tmp inside are the run's own, empty and thrown away: writing
        # there works and reaches nothing of the host's (checked below)
        for name in ("read_key", "write_other_repo", "write_hooks"):
            assert not tried[name]["ok"], (who, name, tried[name])
        for name in ("write_git_config", "write_pokeralph", "main_socket", "web_token"):
            assert not tried[name]["ok"], (who, name, tried[name])
        assert tried["socket_env"]["value"] == "/run/pokeralph/run.sock", who
        assert tried["deliver"]["ok"], (who, tried["deliver"])
        assert not tried["rules_add"]["ok"] and "not for agents" in tried["rules_add"]["error"]
        assert tried["write_tree"]["ok"], who
        # nothing reached the host
        assert not Path(f"{host_tmp}-{who}").exists()
        assert not (user / f"probe-{who}").exists() and not (other / f"probe-{who}").exists()
    assert key.read_text() == "PRIVATE KEY\n"
    assert (repo / ".git" / "config").read_text() == git_config
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert not (repo / ".pokeralph" / "probe").exists()
    # the network: refused and named, then allowed by a person, then by the rule
    refused = agent["net_1"]
    assert not refused["ok"] and target in refused["error"], refused
    assert "sandbox.network.allow" in refused["error"]
    assert agent["net_2"] == {"ok": True, "value": BODY}
    assert looped["net_1"] == {"ok": True, "value": BODY}
    [iteration] = history["battle"]["iterations"]
    sandbox = iteration["sandbox"]
    assert sandbox["confined"] and sandbox["network"] == "allowlist"
    assert sandbox["writable"] == [str(repo.resolve())]
    calls = [c for c in iteration["toolCalls"] if c["toolName"] == "network"]
    decided = [(c["status"], c["approvalMethod"]) for c in calls]
    assert decided == [("rejected", "manual"), ("approved", "manual"), ("approved", "config_rule")]
    assert json.loads(calls[0]["input"]) == {"host": "127.0.0.1", "port": int(port)}
    decisions = [e["payload"] for e in events if e["type"] == "permission_decided"]
    assert [(p["tool"], p["allowed"]) for p in decisions] == [
        ("network", False),
        ("network", True),
        ("network", True),
    ]
    [rule] = [r for r in rules["rules"] if r["toolName"] == "network"]
    assert rule["decision"] == "allow"
    titles = {item["title"] for item in deliveries["items"]}
    assert {"hello from the agent", "hello from the loop"} <= titles
    logs = list((repo / ".pokeralph").rglob("*.log"))
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    assert f"[pokeralph] pokeralph sandbox: the connection to {target} was refused" in text
    assert f'add "{target}" to sandbox.network.allow' in text
    # the agent's refused writes (its stderr), each said once with how to allow one
    assert "[pokeralph] the sandbox refused a write (write_hooks: " in text
    assert "Read-only file system" in text and "sandbox.filesystem.readWrite" in text
    loop_output = iteration["feedbackResults"]["test"]["output"]
    assert "[pokeralph]" not in loop_output  # the loop was let through by the rule


async def _check_status(d: InProcDaemon) -> None:
    status = await d.call("daemon.status", {})
    assert status["sandbox"]["available"], status["sandbox"]


def _no_bwrap(d: InProcDaemon) -> None:
    """bubblewrap made unavailable: the real probe, asked afresh (not its cache) with a
    PATH without bwrap, is what the daemon's sandbox is told from now on."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", "/nonexistent")
        missing = bwrap._probe.__wrapped__(None)
    assert not missing.ok
    d.daemon.sandbox._probe = lambda: missing


async def test_required_refuses_to_start_without_bubblewrap_naming_the_package(
    home: Path,
) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home, sandbox=True) as d:
        agent = {"backend": "command", "command": str(FAKES / "fake_command")}
        task = await setup_task(d, repo, agent, sandbox={"mode": "required"})
        _no_bwrap(d)
        with pytest.raises(Exception) as refused:
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
        message = str(refused.value)
        assert "bubblewrap" in message and "apt install bubblewrap" in message, message
        assert "sandbox.mode" in message
        got = await d.call("task.get", {"repo": str(repo), "taskId": task})
        assert got["task"]["status"] == "pending"  # left as it was


async def test_auto_runs_unconfined_with_the_warning_shown(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home, sandbox=True) as d:
        agent = {"backend": "command", "command": str(FAKES / "fake_command")}
        task = await setup_task(d, repo, agent)
        _no_bwrap(d)
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            events = await watcher.events_until({"battle_complete", "battle_failed"})
        assert events[-1]["type"] == "battle_complete"
        status = await d.call("daemon.status", {})
        history = await d.call("battle.history", {"repo": str(repo), "taskId": task})

        env = {"POKERALPH_SOCKET": str(d.paths.socket), "NO_COLOR": "1"}
        shown = await anyio.to_thread.run_sync(
            lambda: run_ctl(env, "battle", "show", task, "--repo", str(repo))
        )
        said = await anyio.to_thread.run_sync(lambda: run_ctl(env, "status"))
    warning = status["sandbox"]["warning"]
    assert "unconfined" in warning and "bubblewrap" in warning, warning
    [iteration] = history["battle"]["iterations"]
    assert iteration["sandbox"]["confined"] is False
    assert "bubblewrap" in iteration["sandbox"]["reason"]
    assert "! sandbox: none (sandbox.mode auto)" in shown.stdout, shown.stdout + shown.stderr
    assert "! sandbox: battles run unconfined" in said.stdout, said.stdout + said.stderr


async def test_a_verifiers_run_records_its_sandbox_too(home: Path) -> None:
    """Each run shows its sandbox: the verification's report summary records the
    verifier's, as an iteration records its agent's."""
    repo = make_git_repo(home / "repo")
    async with running_daemon(home, sandbox=True) as d:
        agent = {"backend": "command", "command": str(FAKES / "fake_command")}
        task = await setup_task(d, repo, agent, phases=["implementation", "verification"])
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            events = await watcher.events_until({"battle_complete", "battle_failed"})
        history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    assert events[-1]["type"] == "battle_complete", events[-1]
    [report] = history["battle"]["verification"]["reports"]
    assert report["sandbox"]["confined"] is True, report
    assert report["sandbox"]["network"] == "allowlist"
    assert history["battle"]["iterations"][-1]["sandbox"]["confined"] is True
