"""The local-model agent end to end: battles through a real daemon (in this process) on
the scripted Ollama and OpenAI-compatible servers (real HTTP on 127.0.0.1, the real
streaming formats), and the ``pokeralph-agent`` command as a subprocess."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pokeralph_agent.session import SESSION_KIND
from pokeralph_core import documents
from tests.fakes.ollama_api import Call, OllamaAPI, ScriptServer, Text, Tools
from tests.fakes.openai_api import OpenAIAPI
from tests.helpers import local_agent_env, make_git_repo, user_dirs
from tests.inproc import InProcDaemon, running_daemon, setup_task

pytestmark = pytest.mark.anyio
MODEL = "qwen2.5-coder:7b"
DONE = "hello.py prints hello, and it ran. <promise>COMPLETE</promise>"


def _exact(value: dict[str, Any]) -> str:
    return "^" + re.escape(json.dumps(value, sort_keys=True, separators=(",", ":"))) + "$"


async def _setup(d: InProcDaemon, repo: Path, api: ScriptServer, kind: str, **config: Any) -> str:
    agent = {
        "backend": "local",
        "model": MODEL,
        "local": {"baseUrl": api.url, "api": kind, "maxTurns": 10},
        "env": user_dirs(d.home),  # the in-process daemon's own user folders
    }
    config = {
        "phases": ["implementation"],  # the scripted model answers no QA prompt
        "feedbackCommands": {"test": "python3 hello.py"},
        "timeoutMinutes": 2,
        "idleTimeoutMinutes": 2,
        **config,
    }
    hello = ("Hello", "Write hello.py that prints hello", "python3 hello.py prints hello")
    return await setup_task(d, repo, agent, hello, **config)


async def _allow(d: InProcDaemon, repo: Path, tool: str, tool_input: dict[str, Any]) -> None:
    await d.call(
        "rules.add",
        {
            "repo": str(repo),
            "toolName": tool,
            "paramPattern": _exact(tool_input),
            "description": f"the test's own {tool}",
            "decision": "allow",
        },
    )


HELLO = {"path": "hello.py", "content": "print('hello')\n"}
RUN = {"command": "python3 hello.py"}


def _script() -> list[Any]:
    return [
        Tools([Call("create_file", HELLO)], text="I'll write the script."),
        Tools([Call("read_file", {"path": "hello.py"})]),
        Tools([Call("run_in_terminal", RUN)]),
        Text(DONE),
    ]


@pytest.mark.parametrize("kind", ["ollama", "openai"])
async def test_a_battle_on_a_local_model_writes_runs_and_completes(home: Path, kind: str) -> None:
    repo = make_git_repo(home / "repo")
    server: ScriptServer = OllamaAPI(_script()) if kind == "ollama" else OpenAIAPI(_script())
    with server as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, kind)
            await _allow(d, repo, "create_file", HELLO)
            await _allow(d, repo, "run_in_terminal", RUN)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until({"battle_complete", "battle_failed"})
            assert events[-1]["type"] == "battle_complete", events[-1]
            decided = [e["payload"] for e in events if e["type"] == "permission_decided"]
            # create_file and run_in_terminal by the test's rules, read_file by a default rule
            assert [(p["tool"], p["allowed"], p["method"]) for p in decided] == [
                ("create_file", True, "config_rule"),
                ("read_file", True, "config_rule"),
                ("run_in_terminal", True, "config_rule"),
            ]
            assert decided[1]["ruleId"] == "local-read-file"
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
            log = await d.call("battle.log", {"repo": str(repo), "taskId": task})
    assert (repo / "hello.py").read_text() == "print('hello')\n"
    (iteration,) = history["battle"]["iterations"]
    assert iteration["result"] == "success" and iteration["completion"]["kind"] == "sigil"
    assert iteration["usage"]["inputTokens"] == 4 * 42
    assert iteration["usage"]["outputTokens"] == 4 * 7
    assert iteration["costUsd"] == 0
    # what the model asked and what each tool returned, in the battle's log
    text = log["data"]
    assert '"name": "run_in_terminal"' in text and "[exit status 0]" in text
    # the model was sent each result
    sent = [m["content"] for m in api.tool_messages()]
    assert sent[0].startswith("Created file: hello.py")
    assert sent[1] == "print('hello')\n"
    assert sent[2].startswith("$ python3 hello.py\nhello\n[exit status 0]")
    # the session, recorded under the battle's folder, has the same story
    folder = repo / ".pokeralph" / "battles" / task / "sessions"
    (path,) = folder.glob("*.json")
    loaded = documents.load(SESSION_KIND, path)
    assert loaded is not None
    session = loaded.value
    assert session.id == iteration["sessionId"] and session.status == "completed"
    assert [r.files_affected for r in session.tool_results] == [["hello.py"], [], []]
    assert [m.role for m in session.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip


async def test_an_unmatched_command_in_hitl_is_answered_from_the_inbox(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    command = {"command": "echo made > made.txt"}
    script: list[Any] = [Tools([Call("run_in_terminal", command)]), Text(DONE)]
    with OpenAIAPI(script) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, "openai", mode="hitl")
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until({"new_delivery"})
                delivery = events[-1]["payload"]["delivery"]
                assert delivery["source"]["kind"] == "permission"
                assert "run_in_terminal" in delivery["title"]
                assert "echo made" in json.dumps(delivery["content"])
                await d.call("inbox.answer", {"id": delivery["id"], "values": {"value": "allow"}})
                events = await watcher.events_until({"iteration_end"})
            decided = [e["payload"] for e in events if e["type"] == "permission_decided"]
            assert [(p["allowed"], p["method"]) for p in decided] == [(True, "manual")]
    assert (repo / "made.txt").read_text() == "made\n"
    assert api.tool_messages()[0]["content"].startswith("$ echo made > made.txt\n")


async def test_a_denial_from_the_inbox_reaches_the_model(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    script: list[Any] = [Tools([Call("run_in_terminal", {"command": "rm -rf build"})]), Text("ok")]
    with OllamaAPI(script) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, api, "ollama")
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until({"new_delivery"})
                delivery = events[-1]["payload"]["delivery"]
                await d.call(
                    "inbox.answer",
                    {"id": delivery["id"], "values": {"value": "deny"}, "note": "not that"},
                )
                await watcher.events_until({"battle_complete", "battle_failed"})
    (sent,) = api.tool_messages()
    assert sent["content"] == "Error: permission denied: denied by the user: not that"


# --------------------------------------------------------------------------- on its own


def _agent(
    home: Path, work: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = local_agent_env(home)
    return subprocess.run(
        [sys.executable, "-m", "pokeralph_agent", "-C", str(work), "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_command_continues_its_last_session(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    script: list[Any] = [
        Tools([Call("create_file", {"path": "hello.py", "content": "print('hi')\n"})]),
        Text("Created hello.py."),
        Tools([Call("run_in_terminal", {"command": "python3 hello.py"})]),
        Text("It prints hi."),
    ]
    with OllamaAPI(script) as api:
        base = ["--model", MODEL, "--base-url", api.url, "--yes"]
        first = _json(_agent(home, work, *base, "-p", "create a hello world script"))
        assert first["ok"] and first["result"] == "Created hello.py."
        assert first["session"]["status"] == "paused"
        assert (work / "hello.py").read_text() == "print('hi')\n"
        second = _json(_agent(home, work, *base, "--continue", "-p", "run it"))
        assert second["ok"] and second["result"] == "It prints hi."
        assert second["session"]["id"] == first["session"]["id"]
        # the second run sent the whole conversation
        last = api.chat_requests()[-1].messages()
        assert [m["content"] for m in last if m["role"] == "user"] == [
            "create a hello world script",
            "run it",
        ]
        ended = _json(_agent(home, work, "--end"))
        assert ended["session"]["status"] == "completed"
        again = _agent(home, work, *base, "--continue", "-p", "more")
        assert again.returncode == 2 and _json(again)["error"]["code"] == "no_session"


def test_the_command_asks_no_one_without_a_terminal(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    script: list[Any] = [Tools([Call("run_in_terminal", {"command": "touch x"})]), Text("ok")]
    with OllamaAPI(script) as api:
        done = _json(_agent(home, work, "--model", MODEL, "--base-url", api.url, "-p", "go"))
    (call,) = done["toolCalls"]
    assert call["status"] == "rejected" and call["approvalMethod"] == "policy"
    assert "no one can be asked" in call["error"] and not (work / "x").exists()


def test_path_escapes_are_refused(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    (home / "secret.txt").write_text("secret")
    (work / "link").symlink_to(home / "secret.txt")
    calls = [
        Call("read_file", {"path": "../secret.txt"}),
        Call("read_file", {"path": str(home / "secret.txt")}),
        Call("read_file", {"path": "link"}),
        Call("create_file", {"path": "../evil.txt", "content": "x"}),
    ]
    with OllamaAPI([Tools(calls), Text("ok")]) as api:
        done = _json(
            _agent(home, work, "--model", MODEL, "--base-url", api.url, "--yes", "-p", "x")
        )
    assert [c["success"] for c in done["toolCalls"]] == [False] * 4
    for sent in api.tool_messages():
        assert "outside the working directory" in sent["content"]
        assert "secret" not in sent["content"].replace("secret.txt", "")
    assert not (home / "evil.txt").exists()


def test_a_big_output_is_capped_at_10_kb(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    command = {"command": "python3 -c \"print('x' * 50000)\""}
    with OpenAIAPI([Tools([Call("run_in_terminal", command)]), Text("ok")]) as api:
        done = _json(
            _agent(
                home,
                work,
                "--api",
                "openai",
                "--model",
                MODEL,
                "--base-url",
                api.url,
                "--yes",
                "-p",
                "x",
            )
        )
    assert done["ok"]
    (sent,) = api.tool_messages()
    assert len(sent["content"].encode()) <= 10 * 1024
    assert "output truncated" in sent["content"] and "[exit status 0]" in sent["content"]


def test_a_model_in_a_loop_is_stopped_at_max_turns(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    looping = Tools([Call("read_file", {"path": "a.txt"})])
    with OllamaAPI([looping], repeat_last=True) as api:
        done = _agent(
            home, work, "--model", MODEL, "--base-url", api.url, "--max-turns", "4", "-p", "x"
        )
    result = _json(done)
    assert done.returncode == 1 and result["stopReason"] == "max_turns"
    assert result["turns"] == 4 and result["error"]["code"] == "max_turns"
    assert len(api.chat_requests()) == 4
    assert "this exact call 3 times" in api.tool_messages()[-1]["content"]


@pytest.mark.parametrize("unmatched", ["deny", "allow"])
def test_the_command_follows_permissions_unmatched_as_a_battle_does(
    home: Path, unmatched: str
) -> None:
    """Standalone, a call no rule decides gets what permissions.unmatched says (it was
    always asked, or refused for want of a terminal)."""
    from pokeralphd.store import config_writes

    work = home / "work"
    work.mkdir()
    user = home / "config" / "pokeralph" / "config.json"
    config_writes.update_user_layer(user, {"permissions": {"unmatched": unmatched}})
    script: list[Any] = [Tools([Call("run_in_terminal", {"command": "touch x"})]), Text("ok")]
    with OllamaAPI(script) as api:
        done = _json(_agent(home, work, "--model", MODEL, "--base-url", api.url, "-p", "go"))
    (call,) = done["toolCalls"]
    if unmatched == "deny":
        assert call["status"] == "rejected" and "permissions.unmatched is deny" in call["error"]
        assert not (work / "x").exists()
    else:
        assert call["status"] == "executed" and (work / "x").exists()


def test_a_server_that_is_down_says_how_to_start_it(home: Path) -> None:
    work = home / "work"
    work.mkdir()
    with socket.socket() as held:  # bound, never listening: refused, and no one takes it
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        # its two retries still happen, without the default half second and second between
        done = _agent(
            home, work, "--model", MODEL, "--base-url", url, "--retry-backoff", "0", "-p", "x"
        )
    result = _json(done)
    assert done.returncode == 1 and result["error"]["code"] == "server_unreachable"
    assert "ollama serve" in result["error"]["message"]
    assert result["session"]["status"] == "errored"
