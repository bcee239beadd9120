"""Every process pokeralph starts for a battle is an agent on the socket, whatever runs:
feedback loops running code the agent wrote, role runs, a process with the daemon's mark
while no run is tracked, a peer that cannot be identified, and a run's process that
reaches for the dashboard's token. A run also takes its whole process group with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from pokeralph_core.weblink import info_path, token_path
from pokeralphd.proc import AgentScope
from pokeralphd.procenv import OWNER_VAR, TOKEN_VAR
from pokeralphd.protocol.codes import ErrorCode
from tests.helpers import FAKES, make_git_repo, short_tmpdir, wait_until
from tests.inproc import InProcDaemon, ThreadedDaemon, running_daemon, setup_task

pytestmark = pytest.mark.anyio
SCOPE = int(ErrorCode.AGENT_SCOPE)
ESCAPE = str(FAKES / "scope_escape")
END = {"battle_complete", "battle_failed", "battle_blocked", "battle_escalated"}


def probes(out: Path) -> dict[str, dict[str, Any]]:
    return {p["command"]: p for p in map(json.loads, out.read_text().splitlines())}


def assert_all_refused(out: Path) -> None:
    found = probes(out)
    assert set(found) == {"rules add", "trust", "battle approve", "inbox answer"}
    for name, probe in found.items():
        assert probe["exit"] != 0, (name, probe)
        assert str(SCOPE) in probe["out"], (name, probe)


async def question(d: InProcDaemon, repo: Path) -> str:
    """A person's pending question, for an agent to try to answer."""
    params = {"repo": str(repo), "title": "a person's question", "schema": {"type": "confirm"}}
    created = await d.call("inbox.create", params)
    return str(created["delivery"]["id"])


async def battle(d: InProcDaemon, repo: Path, task: str) -> list[dict[str, Any]]:
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        return await watcher.events_until(END)


async def test_code_a_feedback_loop_runs_is_an_agent(home: Path, tmp_path: Path) -> None:
    """The agent wrote the test command (a conftest.py, a Makefile target): the loop runs
    it after the agent's run ended, and it still may not act for a person."""
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "probes.jsonl"
    async with running_daemon(home) as d:
        socket_path = str(d.paths.socket)
        task = await setup_task(
            d,
            repo,
            {"backend": "command", "command": str(FAKES / "fake_command")},
            phases=["implementation"],
        )
        delivery = await question(d, repo)
        loop = f"{sys.executable} {ESCAPE} probe {out} {socket_path} {task} {delivery}"
        await d.call(
            "config.update", {"repo": str(repo), "patch": {"feedbackCommands": {"test": loop}}}
        )
        events = await battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
        rules = await d.call("rules.list", {"repo": str(repo)})
        answered = await d.call("inbox.get", {"repo": str(repo), "id": delivery})
    assert_all_refused(out)
    assert answered["delivery"]["status"] != "completed"
    assert not any("says the agent" in json.dumps(rule) for rule in rules["rules"])


async def test_a_role_run_is_an_agent(home: Path, tmp_path: Path) -> None:
    """A verifier runs the tests too: its code and whatever it starts are the battle's."""
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "probes.jsonl"
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        delivery = await question(d, repo)
        verifier = {
            "backend": "command",
            "command": sys.executable,
            "extraArgs": [ESCAPE, "agent"],
            "env": {"SCOPE_OUT": str(out), "SCOPE_DELIVERY": delivery},
        }
        task = await setup_task(
            d,
            repo,
            {"backend": "command", "command": str(FAKES / "fake_command")},
            phases=["implementation", "verification"],
            roles={"verifier": verifier},
        )
        await battle(d, repo, task)
    assert_all_refused(out)


async def test_a_run_ends_its_whole_group_on_a_normal_exit(home: Path, tmp_path: Path) -> None:
    """A child that dropped the run's token but stayed in the run's process group does
    not outlive a run that exited normally."""
    repo = make_git_repo(tmp_path / "repo")
    pidfile = tmp_path / "child.pid"
    async with running_daemon(home) as d:
        agent = {
            "backend": "command",
            "command": sys.executable,
            "extraArgs": [ESCAPE, "linger", str(pidfile)],
        }
        task = await setup_task(d, repo, agent, phases=["implementation"])
        events = await battle(d, repo, task)
        assert events[-1]["type"] == "battle_complete", events[-1]
    child = psutil.Process(int(pidfile.read_text()))

    def ended() -> bool:
        try:
            return bool(child.status() == psutil.STATUS_ZOMBIE)  # killed; only init reaps it
        except psutil.NoSuchProcess:
            return True

    try:
        # SIGKILL was sent as the run ended; a busy machine may take a moment to run the
        # (low-priority) child's death
        wait_until(ended, 10, "the lingering child to be killed")
    finally:
        if child.is_running():
            child.kill()


async def test_a_peer_gone_before_it_is_looked_up_is_no_person(home: Path, tmp_path: Path) -> None:
    """A client that connects, asks, and exits before the daemon looks it up: its pid
    names nothing any more, so nothing says it is a person."""
    repo = make_git_repo(tmp_path / "repo")
    hit_and_run = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(sys.argv[1])\n"
        "params = {'toolName': 'Bash', 'paramPattern': '^make deploy$', 'decision': 'allow',"
        " 'description': 'gone', 'scope': 'user', 'repo': sys.argv[2]}\n"
        "request = {'jsonrpc': '2.0', 'id': 1, 'method': 'rules.add', 'params': params}\n"
        "s.sendall(json.dumps(request).encode() + b'\\n')\n"
    )
    async with running_daemon(home) as d, d.client() as watcher:
        await d.call("repo.register", {"path": str(repo)})
        await watcher.call("events.subscribe", {})
        # Blocking on purpose: the daemon (in this event loop) accepts the connection
        # only once the client has exited and been reaped.
        argv = [sys.executable, "-c", hit_and_run, str(d.paths.socket), str(repo)]
        subprocess.run(argv, check=True)
        while True:  # until the request was refused, or took effect
            event = await watcher.next_event()
            if event["type"] == "agent_refused" or '"gone"' in json.dumps(event):
                break
        rules = await d.call("rules.list", {"repo": str(repo)})
    assert event["type"] == "agent_refused", event
    assert event["payload"]["method"] == "rules.add"
    assert not any(rule.get("description") == "gone" for rule in rules["rules"])


async def test_our_mark_is_an_agent_with_no_run_under_way(home: Path, tmp_path: Path) -> None:
    """A process carrying the daemon's mark (a feedback loop's leftover, code run during
    an approval wait) is an agent though no run is tracked."""
    repo = make_git_repo(tmp_path / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        assert d.daemon.owner.runs == 0
        env = {
            **os.environ,
            OWNER_VAR: d.daemon.owner.mark,
            "POKERALPH_SOCKET": str(d.paths.socket),
        }
        argv = [sys.executable, "-m", "pokeralphctl", "--json", "trust", str(repo)]
        done = await anyio.run_process(argv, env=env, cwd=repo, check=False)
        listed = await d.call("config.trustList")
    assert done.returncode != 0
    assert str(SCOPE) in done.stdout.decode() + done.stderr.decode()
    assert [entry["trust"]["trustedHash"] for entry in listed["repos"]] == [None]


def test_the_web_token_from_inside_a_run_is_still_an_agent() -> None:
    """The dashboard's token beside the socket, read and presented over the WebSocket by
    a process of a run: its connection is scoped like its Unix-socket ones."""
    home = short_tmpdir()
    daemon = ThreadedDaemon(home, web=True).start()
    try:
        assert daemon.daemon is not None
        owner = daemon.daemon.owner
        secret = Path(token_path(str(daemon.socket))).read_text().strip()
        port = json.loads(Path(info_path(str(daemon.socket))).read_text())["port"]
        token = uuid.uuid4().hex
        argv = [sys.executable, ESCAPE, "ws", str(port), secret]
        with owner.track(token, AgentScope("battle", "r", "001-x")):
            inside = subprocess.run(
                argv,
                env={**os.environ, TOKEN_VAR: token},
                capture_output=True,
                text=True,
                check=True,
            )
        person = subprocess.run(argv, capture_output=True, text=True, check=True)
    finally:
        daemon.stop()
    reply = json.loads(inside.stdout)
    assert reply["error"]["code"] == SCOPE, reply
    assert "the battle agent of r" in reply["error"]["message"]
    assert "result" in json.loads(person.stdout)  # another process, no run's: a person
