"""The real Gemini CLI, OpenCode and Qwen Code, each driven over the Agent Client Protocol
by a real daemon (``agent.backend gemini|opencode|qwen``) against a scripted model API on
127.0.0.1 in its real wire format: Gemini's ``streamGenerateContent``
(tests/fakes/gemini_api.py, ``GOOGLE_GEMINI_BASE_URL``), the OpenAI-compatible chat
completions for OpenCode (a provider in ``OPENCODE_CONFIG_CONTENT``) and Qwen Code
(``OPENAI_BASE_URL``). What was learned is in tests/real/ACP-FACTS.md.

The CLIs are the ones ``tests/real/install.sh`` pins under ``.tools/``; a missing one
skips its tests. Each runs with ``HOME`` and the XDG folders in a temporary folder.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.gemini_api import GeminiAPI
from tests.fakes.ollama_api import Call, Text, Tools, Turn
from tests.fakes.openai_api import OpenAIAPI
from tests.fakes.scripted_http import ScriptedHTTP
from tests.helpers import make_git_repo
from tests.inproc import InProcDaemon, running_daemon, setup_task

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".tools" / "node_modules" / ".bin"
NODE = BIN / "node"  # the Node LTS tests/real/install.sh pins
NODE_CACHE = ROOT / ".tools" / "node-compile-cache"
END = {"battle_complete", "battle_failed", "battle_cancelled"}
FILE = "acp.txt"
DENIED = "denied.txt"  # a deny rule's path
CANCELLED = "cancelled.txt"  # asked for when the battle is cancelled
DONE = "Wrote it.\n<promise>COMPLETE</promise>"
# OpenCode's work besides the turn, none of it needed here: the models.dev catalogue (the
# provider is in the config; offline it fails at once, not after a timeout), its default
# plugins, LSP downloads, the file watcher, and reading Claude Code's ~/.claude.
OPENCODE_QUIET = (
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER",
    "OPENCODE_DISABLE_CLAUDE_CODE",
)


class SideAwareOpenAI(OpenAIAPI):
    """The OpenAI-compatible fake, with the CLIs' side requests (OpenCode's title
    generator, Qwen Code's memory extraction) answered apart: they take no turn of the
    script, whichever order they come in."""

    SIDE = ("You are a title generator", "managed memory extraction subagent")

    def __init__(self, script: list[Turn]) -> None:
        super().__init__(script)
        self._local = threading.local()

    def remember(self, method: str, path: str, headers: dict[str, str], body: Any) -> Any:
        self._local.body = body
        return super().remember(method, path, headers, body)

    def next_turn(self) -> Turn:
        body = getattr(self._local, "body", None)
        messages = body.get("messages") if isinstance(body, dict) else None
        first = json.dumps(messages[0])[:400] if isinstance(messages, list) and messages else ""
        if any(marker in first for marker in self.SIDE):
            return Text("Write the file")
        return super().next_turn()


@dataclass(frozen=True)
class Cli:
    name: str
    write: Call  # the model's tool call that writes FILE (its path made absolute)

    @property
    def program(self) -> Path:
        return BIN / self.name

    def api(self, script: list[Turn]) -> ScriptedHTTP[Any]:
        if self.name == "gemini":
            return GeminiAPI([t for t in script if isinstance(t, Text | Tools)])
        return SideAwareOpenAI(script)

    def env(self, api: ScriptedHTTP[Any], home: Path, *, relaunch: bool = False) -> dict[str, str]:
        """The CLI's environment: its model endpoint, ``HOME`` and the XDG folders in
        ``home``. Gemini CLI and Qwen Code start Node a second time to give themselves
        a larger heap (a third of their CPU here) unless ``relaunch``."""
        home.mkdir(parents=True, exist_ok=True)
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        if self.name in ("gemini", "qwen"):
            env.update(node_env())
        if self.name == "gemini":
            env.update(GOOGLE_GEMINI_BASE_URL=api.url, GEMINI_API_KEY="test-key")
            if not relaunch:
                env["GEMINI_CLI_NO_RELAUNCH"] = "true"
        elif self.name == "qwen":
            env.update(
                OPENAI_BASE_URL=api.url + "/v1", OPENAI_API_KEY="sk-test", OPENAI_MODEL="fake-model"
            )
            if not relaunch:
                env["QWEN_CODE_NO_RELAUNCH"] = "true"
        else:
            config = {
                "model": "fake/fake-model",
                "provider": {
                    "fake": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "fake",
                        "options": {"baseURL": api.url + "/v1", "apiKey": "sk-test"},
                        "models": {"fake-model": {"name": "fake"}},
                    }
                },
                # No "permission": the preset's OPENCODE_PERMISSION makes it ask.
                "autoupdate": False,
                "share": "disabled",
                # Its undo snapshots (the work tree added to a git repository of its own
                # at each step) are OpenCode's business, not the protocol's: without them
                # and OPENCODE_QUIET its four battles cost ~10% less CPU (22 s, not 24).
                "snapshot": False,
            }
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
            env.update(dict.fromkeys(OPENCODE_QUIET, "1"))
            # Its models.dev catalogue (a snapshot inside the binary) is read at
            # session/new and at the first turn: a third of its CPU here (4.2 -> 2.8 s a
            # battle). The provider and its model are in the config, not the catalogue.
            catalogue = home / "models.json"
            catalogue.write_text("{}")
            env["OPENCODE_MODELS_PATH"] = str(catalogue)
            # At each start it installs @opencode-ai/plugin into its config folder from
            # the npm registry (in the background): offline, it asks no one (~0.3 s of
            # CPU a run, and the tests stay on 127.0.0.1).
            env["npm_config_offline"] = "true"
        return env


def node_env() -> dict[str, str]:
    """Where Gemini CLI and Qwen Code (``#!/usr/bin/env node``) find Node: the pinned LTS
    first on ``PATH`` (its own folder, which holds nothing else), with its module compile
    cache (``NODE_COMPILE_CACHE``, Node 22.1 and later) beside the CLIs. Qwen Code turns
    that cache on by itself (in the temporary folder) where Node has it; a Gemini CLI user
    may set the variable. Each start then reads the bundles' compiled code instead of
    compiling them again: with Node 24, ~20% less CPU a battle than Debian's Node 20,
    which has neither. Without a Node there (install.sh found no package of it for this
    platform), the machine's."""
    if not NODE.exists():
        return {}
    NODE_CACHE.mkdir(exist_ok=True)
    path = f"{NODE.resolve().parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"PATH": path, "NODE_COMPILE_CACHE": str(NODE_CACHE)}


def _write(name: str, tool: str, path_key: str) -> Cli:
    return Cli(name, Call(tool, {path_key: FILE, "content": "hi\n"}))


CLIS = [
    _write("gemini", "write_file", "file_path"),
    _write("opencode", "write", "filePath"),
    _write("qwen", "write_file", "file_path"),
]


@pytest.fixture(params=CLIS, ids=[c.name for c in CLIS])
def cli(request: pytest.FixtureRequest) -> Cli:
    found: Cli = request.param
    if not (found.program.exists() and os.access(found.program, os.X_OK)):
        pytest.skip(f"{found.name} not installed at {found.program} (run tests/real/install.sh)")
    return found


def _write_call(cli: Cli, repo: Path, name: str = FILE) -> Call:
    """The model's call that writes "hi" into ``name`` in ``repo`` (every one of the CLIs
    wants an absolute path)."""
    args = dict(cli.write.arguments)
    key = next(k for k in args if k != "content")
    args[key] = str(repo / name)
    return Call(cli.write.name, args)


def _script(cli: Cli, repo: Path, second: str) -> list[Turn]:
    """Two tool turns, each writing one file (``FILE``, then ``second``), then the end.

    The completion comes with the second call: OpenCode and Qwen Code end the turn at
    once when a call is rejected (ACP-FACTS.md), so a text after it would never be asked
    for; Gemini CLI asks the model again and gets the closing text."""
    return [
        Tools([_write_call(cli, repo)]),
        Tools([_write_call(cli, repo, second)], text=DONE),
        Text(DONE),
    ]


def _calls(iteration: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The iteration's edits whose input names the file ``name``."""
    return [c for c in iteration["toolCalls"] if c["toolName"] == "edit" and name in c["input"]]


async def _setup(d: InProcDaemon, repo: Path, cli: Cli, env: dict[str, str], **config: Any) -> str:
    return await setup_task(
        d,
        repo,
        {"backend": cli.name, "command": str(cli.program), "env": env},
        ("Write acp.txt", "Put hi into acp.txt", "acp.txt says hi"),
        autoCommit=False,
        phases=["implementation"],
        **config,
    )


async def _iteration(d: InProcDaemon, repo: Path, task: str) -> dict[str, Any]:
    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    [iteration] = history["battle"]["iterations"]
    found: dict[str, Any] = iteration
    return found


def _in_repo(repo: Path) -> list[int]:
    """Processes whose working directory is in ``repo`` (the agent and its children)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd == str(repo) or cwd.startswith(str(repo) + os.sep):
                pids.append(int(entry.name))
    return pids


async def test_unmatched_calls_run_and_a_deny_rule_stops_one_without_asking(
    cli: Cli, home: Path
) -> None:
    """``permissions.unmatched: allow`` runs the first edit at once (``auto``); a deny rule
    on the second one's path rejects it (``config_rule``) with no inbox item; the battle
    completes and no process of the agent is left."""
    repo = make_git_repo(home / "repo")
    with cli.api(_script(cli, repo, DENIED)) as api:
        async with running_daemon(home) as d:
            env = cli.env(api, home / "agent-home")
            task = await _setup(d, repo, cli, env, permissions={"unmatched": "allow"})
            added = await d.call(
                "rules.add",
                {
                    "repo": str(repo),
                    "toolName": "edit",
                    "paramPattern": "denied\\.txt",
                    "description": "never denied.txt",
                    "decision": "deny",
                },
            )
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until(END, timeout=180)
            assert events[-1]["type"] == "battle_complete", events[-1]
            assert not [e for e in events if e["type"] == "new_delivery"]
            iteration = await _iteration(d, repo, task)
    assert (repo / FILE).read_text() == "hi\n"
    [call] = _calls(iteration, FILE)
    assert call["status"] == "executed" and call["approvalMethod"] == "auto"
    assert call["result"]["filesAffected"] == [FILE]
    assert iteration["sessionId"]
    assert not (repo / DENIED).exists()
    [denied] = _calls(iteration, DENIED)
    assert denied["status"] == "rejected" and denied["approvalMethod"] == "config_rule"
    assert denied["ruleId"] == added["rule"]["id"]
    assert not _in_repo(repo)


async def test_an_ask_answered_allow_runs_and_cancel_while_asking_ends_the_tree(
    cli: Cli, home: Path
) -> None:
    """The first edit asks: an inbox item, answered allow, and the edit runs (``manual``);
    the second edit asks too, and cancelling the battle while it waits ends the agent's
    whole tree without writing."""
    repo = make_git_repo(home / "repo")
    with cli.api(_script(cli, repo, CANCELLED)) as api:
        async with running_daemon(home) as d:
            # relaunched: Gemini CLI and Qwen Code run as a tree of Node processes
            env = cli.env(api, home / "agent-home", relaunch=True)
            task = await _setup(d, repo, cli, env)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until({"new_delivery", *END}, timeout=180)
                assert events[-1]["type"] == "new_delivery", events[-1]
                delivery = events[-1]["payload"]["delivery"]
                assert delivery["source"]["kind"] == "permission" and "edit" in delivery["title"]
                await d.call("inbox.answer", {"id": delivery["id"], "values": {"value": "allow"}})
                events = await watcher.events_until({"new_delivery", *END}, timeout=180)
                assert events[-1]["type"] == "new_delivery", events[-1]
                assert (repo / FILE).read_text() == "hi\n"  # the first edit ran
                assert _in_repo(repo)  # the agent runs, waiting for the second answer
                await d.call("battle.cancel", {"repo": str(repo)})
                events = await watcher.events_until(END, timeout=60)
            assert events[-1]["type"] == "battle_cancelled", events[-1]
            iteration = await _iteration(d, repo, task)
    [call] = _calls(iteration, FILE)
    assert call["approvalMethod"] == "manual" and call["status"] == "executed"
    assert not (repo / CANCELLED).exists()
    assert not _in_repo(repo)
