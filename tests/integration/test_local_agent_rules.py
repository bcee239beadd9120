"""``pokeralph-agent`` on its own writes none of the daemon's files (issue 22).

A person's "allow always" at the terminal and the read-only default rules go into the
user's config through the daemon (``rules.add`` with scope user, ``rules.installDefaults``);
without a daemon they hold for that run only and nothing is written. Neither method is
open to an agent's connection: no rule is made on an agent's own authority.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphd.server.methods import build_table
from tests.fakes.ollama_api import Call, OllamaAPI, Text, Tools
from tests.helpers import local_agent_env, make_git_repo
from tests.inproc import running_daemon

MODEL = "qwen2.5-coder:7b"
TOUCH = {"command": "touch x"}
ARGS = ("--model", MODEL, "-p", "go", "--base-url")


def _at_a_terminal(home: Path, work: Path, socket: Path, url: str) -> dict[str, Any]:
    """The agent asked to run ``touch x``, with a person at a terminal answering "allow
    always"; its JSON result."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"a\n")  # typed ahead: the terminal keeps it until it is read
        done = subprocess.run(
            [sys.executable, "-m", "pokeralph_agent", "-C", str(work), "--json", *ARGS, url],
            env={**local_agent_env(home), "POKERALPH_SOCKET": str(socket)},
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.stdout.strip(), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.anyio
async def test_allow_always_at_the_terminal_is_written_by_the_daemon(home: Path) -> None:
    work = make_git_repo(home / "work")
    script: list[Any] = [Tools([Call("run_in_terminal", TOUCH)]), Text("ok")]
    with OllamaAPI(script) as api:
        async with running_daemon(home) as d:
            await d.call("repo.register", {"path": str(work)})
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"types": ["config_updated"]})
                result = await anyio.to_thread.run_sync(
                    _at_a_terminal, home, work, d.paths.socket, api.url
                )
                # the daemon announced both writes of the user's layer
                await watcher.next_event()
                await watcher.next_event()
            rules = await d.call("rules.list", {"repo": str(work)})
    (call,) = result["toolCalls"]
    assert call["status"] == "executed" and call["approvalMethod"] == "manual"
    assert (work / "x").exists()
    by_tool = {r["toolName"]: r for r in rules["rules"] if r["source"] == "user"}
    assert by_tool["run_in_terminal"]["decision"] == "allow"
    assert by_tool["read_file"]["id"] == "local-read-file"  # the defaults, by the daemon
    on_disk = json.loads(d.paths.user_config_file.read_text())
    assert {r["toolName"] for r in on_disk["approvalRules"]} >= {"run_in_terminal", "read_file"}


def test_without_a_daemon_allow_always_holds_for_the_run_only(home: Path) -> None:
    work = make_git_repo(home / "work")
    script: list[Any] = [Tools([Call("run_in_terminal", TOUCH)]), Text("ok")]
    with OllamaAPI(script) as api:
        result = _at_a_terminal(home, work, home / "no.sock", api.url)
    (call,) = result["toolCalls"]
    assert call["status"] == "executed" and call["approvalMethod"] == "manual"
    # neither the rule nor the defaults were written by the agent itself
    assert not (home / "config" / "pokeralph" / "config.json").exists()
    assert not (home / "state" / "pokeralph" / "localagent.json").exists()


def test_an_agent_may_not_make_rules() -> None:
    """The dispatcher refuses every method not marked for agents to an agent's
    connection (tests/integration/test_agent_scope.py): these are not."""
    methods = build_table().methods
    for name in ("rules.add", "rules.installDefaults", "rules.remove", "config.update"):
        assert not methods[name].agent, name
