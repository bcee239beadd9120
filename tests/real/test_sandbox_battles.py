"""Battles in the sandbox through a real daemon: the real Claude Code and Codex CLIs and
the local agent, each against its scripted model server on the host's 127.0.0.1.

The daemon runs in this process with its sandbox on (``running_daemon(sandbox=True)``)
and ``sandbox.network`` at its default, ``allowlist``: each run has a network namespace
of its own with no route out, so its model requests reach the scripted server only
through the egress proxy, which lets the backend's configured model endpoint through
without asking (no ``network`` permission request is recorded). Each battle completes,
the agent's file write lands in the working tree, and the iteration records its sandbox
(``Iteration.sandbox``). Everything the runs need is where a user's would be, or
declared by the backend: the working tree, the CLI's installation (``.tools``), its own
state (``~/.claude`` under the run's ``HOME``, ``CODEX_HOME``), the daemon's
interpreter; nothing is listed in ``sandbox.filesystem``.

Skipped without a working bubblewrap (tests/integration/install-bwrap.sh) or without the
CLI in question (tests/real/install.sh).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pokeralphd.sandbox import EgressProxy, probe
from pokeralphd.sandbox import service as sandbox_service
from tests.fakes.messages_api import MessagesAPI, Text, ToolUse
from tests.fakes.ollama_api import Call, OllamaAPI, Tools
from tests.fakes.openai_api import OpenAIAPI
from tests.fakes.responses_api import Call as CodexCall
from tests.fakes.responses_api import ResponsesAPI, Say
from tests.helpers import make_git_repo, user_dirs
from tests.inproc import InProcDaemon, running_daemon, setup_task
from tests.real.conftest import claude_env
from tests.real.test_real_codex import DEFAULT_CODEX, codex_env

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.fakes.ollama_api import ScriptServer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}"),
]
END = {"battle_complete", "battle_failed", "battle_paused", "battle_blocked"}
SIGIL = "All done.\n\n<promise>COMPLETE</promise>"


@pytest.fixture
def proxies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EgressProxy]]:
    """Every egress proxy the daemon's sandbox opens, to count what each carried."""
    made: list[EgressProxy] = []

    class Counted(EgressProxy):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(sandbox_service, "EgressProxy", Counted)
    yield made


@pytest.fixture
def repo(home: Path) -> Path:
    return make_git_repo(home / "repo")


def _host(url: str) -> str:
    """``host:port`` of a scripted server's URL."""
    return url.split("//", 1)[1].split("/", 1)[0]


async def _battle(d: InProcDaemon, repo: Path, task: str) -> tuple[list[dict[str, Any]], Any]:
    async with d.client() as watcher:
        await watcher.call("events.subscribe", {"repo": str(repo)})
        await d.call("battle.start", {"repo": str(repo), "taskId": task})
        try:
            events = await watcher.events_until(END, timeout=90)
        except TimeoutError:  # what the run said, to see why
            log = await d.call("battle.log", {"repo": str(repo), "taskId": task})
            raise AssertionError(
                f"the battle did not end; its log:\n{log['data'][-4000:]}"
            ) from None
    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
    if events[-1]["type"] != "battle_complete":  # what the run said, to see why
        log = await d.call("battle.log", {"repo": str(repo), "taskId": task})
        raise AssertionError(f"{events[-1]}; the battle's log:\n{log['data'][-4000:]}")
    return events, history


def _check_confined(
    events: list[dict[str, Any]],
    history: Any,
    repo: Path,
    api_host: str,
    proxies: list[EgressProxy],
    requests: int,
) -> None:
    """The battle completed confined, under ``allowlist`` with the model endpoint on
    the list, nobody was asked about a host, and the proxy carried the model's
    requests (``requests`` of them reached the scripted server: the only way out)."""
    assert events[-1]["type"] == "battle_complete", events[-1]
    [iteration] = history["battle"]["iterations"]
    sandbox = iteration["sandbox"]
    assert sandbox["confined"] is True and sandbox["network"] == "allowlist", sandbox
    assert api_host in sandbox["allow"], sandbox
    assert str(repo.resolve()) in sandbox["writable"], sandbox
    assert not [c for c in iteration["toolCalls"] if c["toolName"] == "network"]
    assert requests >= 2  # a tool call, then the answer with the sigil
    assert sum(p.let_through for p in proxies) >= 1, "the model was reached around the proxy"


async def test_claude_code_completes_a_battle_in_the_sandbox(
    claude_bin: Path, home: Path, repo: Path, proxies: list[EgressProxy]
) -> None:
    write = {"command": "echo hi > claude.txt", "description": "Write the file"}
    with MessagesAPI([ToolUse("Bash", write, text="Writing."), Text(SIGIL)]) as api:
        (home / "h").mkdir()
        agent = {
            "backend": "claude",
            "command": str(claude_bin),
            "env": claude_env(api, home / "h"),
        }
        async with running_daemon(home, sandbox=True) as d:
            task = await setup_task(
                d,
                repo,
                agent,
                ("Write claude.txt", "Put hi into claude.txt", "claude.txt says hi"),
                autoCommit=False,
                phases=["implementation"],
                permissions={"unmatched": "allow"},
            )
            events, history = await _battle(d, repo, task)
        requests = len(api.message_requests())
    assert (repo / "claude.txt").read_text() == "hi\n"
    _check_confined(events, history, repo, _host(api.url), proxies, requests)


@pytest.fixture
def codex_bin() -> Path:
    path = Path(os.environ.get("POKERALPH_REAL_CODEX") or DEFAULT_CODEX)
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.skip(f"real Codex CLI not installed at {path} (run tests/real/install.sh)")
    return path


async def test_codex_completes_a_battle_in_the_sandbox(
    codex_bin: Path, home: Path, repo: Path, proxies: list[EgressProxy]
) -> None:
    """Codex's model endpoint is its ``config.toml``'s provider (``base_url``), as a
    user configures one: the sandbox reads it there, with no ``sandbox.network.allow``."""
    write = CodexCall("exec_command", {"cmd": "printf hi > codex.txt"}, text="Writing.")
    with ResponsesAPI([write, Say(SIGIL)]) as api:
        env = codex_env(api, home)
        agent = {"backend": "codex", "command": str(codex_bin), "env": env}
        async with running_daemon(home, sandbox=True) as d:
            task = await setup_task(
                d,
                repo,
                agent,
                ("Write codex.txt", "Put hi into codex.txt", "codex.txt says hi"),
                autoCommit=False,
                phases=["implementation"],
            )
            events, history = await _battle(d, repo, task)
        requests = len(api.response_requests())
    assert (repo / "codex.txt").read_text() == "hi"
    _check_confined(events, history, repo, _host(api.url), proxies, requests)


@pytest.mark.parametrize("kind", ["ollama", "openai"])
async def test_the_local_agent_completes_a_battle_in_the_sandbox(
    home: Path, repo: Path, proxies: list[EgressProxy], kind: str
) -> None:
    hello = {"path": "hello.py", "content": "print('hello')\n"}
    script: list[Any] = [Tools([Call("create_file", hello)], text="Writing."), Text(SIGIL)]
    server: ScriptServer = OllamaAPI(script) if kind == "ollama" else OpenAIAPI(script)
    with server as api:
        agent = {
            "backend": "local",
            "model": "qwen2.5-coder:7b",
            "local": {"baseUrl": api.url, "api": kind, "maxTurns": 10},
            "env": user_dirs(home / "user"),
        }
        async with running_daemon(home, sandbox=True) as d:
            task = await setup_task(
                d,
                repo,
                agent,
                ("Hello", "Write hello.py that prints hello", "python3 hello.py prints hello"),
                autoCommit=False,
                phases=["implementation"],
                feedbackCommands={"test": "python3 hello.py"},
            )
            exact = json.dumps(hello, sort_keys=True, separators=(",", ":"))
            rule = {"toolName": "create_file", "paramPattern": "^" + re.escape(exact) + "$"}
            await d.call(
                "rules.add",
                {"repo": str(repo), **rule, "description": "the test's", "decision": "allow"},
            )
            events, history = await _battle(d, repo, task)
        requests = len(api.chat_requests())
    assert (repo / "hello.py").read_text() == "print('hello')\n"
    _check_confined(events, history, repo, _host(api.url), proxies, requests)
    [iteration] = history["battle"]["iterations"]
    assert iteration["feedbackResults"]["test"]["passed"], iteration["feedbackResults"]
