"""``pokeralph-acp`` driven by the official ACP SDK's client, playing the editor, against a
real daemon running the DEMO agent's battles on the bundled sample repository.

The agent is a real subprocess (``python -m pokeralph_acp``: stdio is the point); the
daemon runs in this process on a real socket (``daemon`` fixture). The SDK
(``agent-client-protocol``) validates every message both ways against the protocol's own
models, so a wrong field name fails here as it would in Zed.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import pytest

from pokeralphctl.commands.demo import make_sample
from pokeralphctl.terminal import Terminal
from tests.helpers import DaemonProcess, LazyModule

if TYPE_CHECKING:
    import acp
    from acp import schema
else:  # imported by the worker that runs these tests (see ONE_WORKER in tests/conftest.py)
    acp = LazyModule("acp")
    schema = LazyModule("acp.schema")

pytestmark = pytest.mark.anyio
TASK = "001-implement-text-statistics"
AGENT = [sys.executable, "-m", "pokeralph_acp"]


class Editor:
    """The editor's side: records every update; answers permission questions by a rule;
    cancels the turn when ``cancel_on`` sees an update it wants."""

    def __init__(self, choose: str | None = "allow_once") -> None:
        self.updates: list[Any] = []
        self.asked: list[schema.RequestPermissionRequest] = []
        self.choose = choose
        self.conn: acp.ClientSideConnection | None = None
        self.cancel_on: Any = None
        self.session_id = ""
        self.cancel_sent = anyio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def request_permission(
        self, options: list[schema.PermissionOption], session_id: str, tool_call: Any, **kw: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append(
            schema.RequestPermissionRequest(
                options=options, session_id=session_id, tool_call=tool_call
            )
        )
        chosen = next(o for o in options if o.kind == self.choose)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)
        if self.cancel_on is not None and self.cancel_on(update) and self.conn is not None:
            self.cancel_on = None
            await self.conn.cancel(session_id=session_id)
            self.cancel_sent.set()

    def of(self, kind: type[Any]) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.of(schema.AgentMessageChunk) if hasattr(u.content, "text")
        )


def as_client(editor: Editor) -> acp.Client:
    """The editor as the SDK's ``Client``: it answers what these tests need (permission
    questions, updates); the rest (files, terminals) an ACP agent may not call unless the
    client says it can, and ours says nothing of them."""
    return cast("acp.Client", editor)


def sample(daemon: DaemonProcess, home: Path, mode: str = "yolo", pace: str = "0") -> Path:
    """The demo's sample repository, registered, on the DEMO agent at ``pace``."""
    target = home / "sample"
    prd = make_sample(Terminal(daemon.env, str(home), sys.stdin, sys.stdout, sys.stderr), target)
    daemon.call("repo.register", {"path": str(target)})
    daemon.call("prd.update", {"prd": prd, "repo": str(target)})
    daemon.call(
        "config.update",
        {
            "repo": str(target),
            "patch": {
                "agent": {"backend": "demo", "extraArgs": ["--pace", pace]},
                "mode": mode,
                "maxIterationsPerTask": 5,
                "feedbackLoops": ["test"],
                "feedbackCommands": {"test": f"{sys.executable} -m unittest -q"},
            },
        },
    )
    return target


@contextlib.asynccontextmanager
async def session(editor: Editor, daemon: DaemonProcess, cwd: Path) -> AsyncIterator[Any]:
    """Start the agent, initialize, open a session on ``cwd``: the connection."""
    async with acp.spawn_agent_process(as_client(editor), *AGENT, env=daemon.env, cwd=str(cwd)) as (
        conn,
        _proc,
    ):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.protocol_version == 1 and init.agent_info is not None
        assert init.agent_info.name == "pokeralph" and init.auth_methods == []
        new = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        editor.session_id = new.session_id
        yield conn


async def prompts(
    editor: Editor, daemon: DaemonProcess, cwd: Path, *texts: str, timeout: float = 90
) -> list[Any]:
    """A session on ``cwd`` sent each of ``texts`` as a prompt, in turn: the replies."""
    replies = []
    async with session(editor, daemon, cwd) as conn:
        with anyio.fail_after(timeout):
            for text in texts:
                prompt = [acp.text_block(text)]
                replies.append(await conn.prompt(session_id=editor.session_id, prompt=prompt))
    return replies


async def test_a_prompt_adds_a_task_and_streams_its_battle_to_the_end(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = sample(daemon, home)
    (repo / "sub").mkdir()  # the editor's folder may be anywhere in the repository
    editor = Editor()
    [reply] = await prompts(
        editor,
        daemon,
        repo / "sub",
        "add a task: Finish textstats\n\n- word_count counts words\n"
        "- top_words returns the most frequent words",
    )
    assert reply.stop_reason == "end_turn"
    tasks = daemon.call("task.list", {"repo": str(repo)})["tasks"]
    new = next(t for t in tasks if t["title"] == "Finish textstats")
    assert new["acceptanceCriteria"] == [
        "word_count counts words",
        "top_words returns the most frequent words",
    ]
    assert new["status"] == "completed"
    text = editor.text()
    assert f"Added task **{new['id']}**" in text and "Battle complete" in text
    assert "I am a scripted demo" in text  # the agent's own words, as message chunks
    assert "**Iteration 2**" in text and "*Phase: verification*" in text
    starts = editor.of(schema.ToolCallStart)
    assert starts and all(s.status == "in_progress" for s in starts)
    ends = {u.tool_call_id: u.status for u in editor.of(schema.ToolCallProgress)}
    assert {s.tool_call_id for s in starts} <= set(ends)  # every tool call was closed
    plans = editor.of(schema.AgentPlanUpdate)
    final = [e.content for e in plans[-1].entries]
    assert final == [
        "Iteration 1 of 5 — success",
        "Iteration 2 of 5 — success",
        "Verification (cycle 1)",
    ]
    assert all(e.status == "completed" for e in plans[-1].entries)
    assert editor.asked == []  # YOLO: nobody was asked


async def test_hitl_approvals_are_the_editors_permission_questions(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = sample(daemon, home, mode="hitl")
    editor = Editor(choose="allow_once")
    [reply] = await prompts(editor, daemon, repo, f"run {TASK}")
    assert reply.stop_reason == "end_turn"
    # iteration 1 waits for an approval; iteration 2 claims completion, which ends it
    assert len(editor.asked) == 1
    first = editor.asked[0]
    assert first.tool_call.title == f"Approve iteration 1 of {TASK}?"
    assert [(o.name, o.kind) for o in first.options] == [
        ("Approve", "allow_once"),
        ("Reject", "reject_once"),
    ]
    history = daemon.call("battle.history", {"taskId": TASK, "repo": str(repo)})
    assert history["battle"]["status"] == "completed"
    assert len(history["battle"]["iterations"]) == 2
    done = {u.tool_call_id: u for u in editor.of(schema.ToolCallProgress)}
    answered = done[first.tool_call.tool_call_id]
    assert answered.status == "completed"


async def test_rejecting_the_approval_pauses_the_battle_and_ends_the_turn(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = sample(daemon, home, mode="hitl")
    editor = Editor(choose="reject_once")
    [reply] = await prompts(editor, daemon, repo, f"start {TASK}")
    assert reply.stop_reason == "end_turn" and len(editor.asked) == 1
    assert "Battle paused" in editor.text()
    history = daemon.call("battle.history", {"taskId": TASK, "repo": str(repo)})
    assert history["battle"]["status"] == "paused"


async def test_cancel_pauses_the_battle(daemon: DaemonProcess, home: Path) -> None:
    repo = sample(daemon, home, pace="1")  # a battle slow enough to be cancelled in its run
    editor = Editor()
    editor.cancel_on = lambda u: isinstance(u, schema.AgentPlanUpdate)  # iteration 1 began
    [reply] = await prompts(editor, daemon, repo, f"run {TASK}", timeout=60)
    assert editor.cancel_sent.is_set()
    assert reply.stop_reason == "cancelled"
    history = daemon.call("battle.history", {"taskId": TASK, "repo": str(repo)})
    assert history["battle"]["status"] == "paused"
    # `run TASK` again resumes the paused battle (at full speed now) to its end.
    agent = {"backend": "demo", "extraArgs": ["--pace", "0"]}
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": agent}})
    editor = Editor()
    [reply] = await prompts(editor, daemon, repo, f"run {TASK}", timeout=60)
    assert reply.stop_reason == "end_turn"
    assert f"Battle of **{TASK}** resumed" in editor.text() and "Battle complete" in editor.text()


async def test_a_folder_outside_git_is_a_clear_error(daemon: DaemonProcess, home: Path) -> None:
    plain = home / "plain"
    plain.mkdir()
    editor = Editor()
    async with acp.spawn_agent_process(
        as_client(editor), *AGENT, env=daemon.env, cwd=str(plain)
    ) as (conn, _proc):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as err:
            await conn.new_session(cwd=str(plain), mcp_servers=[])
    assert "not in a git repository" in str(err.value.args[0]) or "git" in repr(err.value)


def run_agent(env: dict[str, str], lines: list[bytes]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        AGENT, input=b"".join(lines), env=env, capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_malformed_input_gets_json_rpc_errors_and_the_agent_goes_on(
    daemon: DaemonProcess, home: Path
) -> None:
    big = b'{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"x":"' + b"a" * (9 << 20)
    replies = run_agent(
        daemon.env,
        [
            b"{not json\n",
            b"\xff\xfe\n",
            b"[1, 2]\n",
            b'{"jsonrpc":"1.0","id":1,"method":"initialize"}\n',
            b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}\n',
            b'{"jsonrpc":"2.0","id":2,"method":7}\n',
            b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":"x"}\n',
            b'{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}\n',
            b'{"jsonrpc":"2.0","id":5,"method":"session/teleport","params":{}}\n',
            b'{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"x","prompt":[]}}\n',
            b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}\n',
            big + b'"}}\n',
            b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"relative"}}\n',
            b'{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":1}}\n',
        ],
    )
    by_id = {json.dumps(r.get("id")): r for r in replies}
    codes = [r["error"]["code"] for r in replies if r.get("id") is None]
    assert codes == [-32700, -32700, -32600, -32600, -32600, -32600]
    assert by_id["2"]["error"]["code"] == -32600
    assert by_id["3"]["error"]["code"] == -32602
    assert by_id["4"]["error"]["data"] == {"field": "protocolVersion"}
    assert by_id["5"]["error"]["code"] == -32601
    assert by_id["6"]["error"]["data"] == {"field": "sessionId"}
    assert by_id["7"]["error"]["data"] == {"field": "cwd"}
    assert by_id["8"]["result"]["protocolVersion"] == 1  # still serving after all that
    assert len(replies) == 13  # the cancel of nothing got no answer


def test_no_daemon_and_none_may_be_started_is_a_clear_error(home: Path) -> None:
    env = dict(
        __import__("os").environ,
        POKERALPH_SOCKET=str(home / "none.sock"),
        POKERALPH_NO_AUTOSTART="1",
    )
    (reply,) = run_agent(
        env,
        [b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}\n'],
    )
    assert reply["error"]["code"] == -32603
    assert "pokeralphd is not running" in reply["error"]["message"]
    assert "pokeralphctl daemon start" in reply["error"]["message"]
    assert reply["error"]["data"] == {"socket": str(home / "none.sock")}


async def test_plan_asks_in_turns_and_adds_the_planned_tasks(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    from tests.integration.test_planning import setup

    setup(daemon, repo, home)  # the fake planner: two questions, then a PRD of two tasks
    editor = Editor()
    replies = await prompts(
        editor, daemon, repo, "plan: a todo list for the terminal", "A JSON file", "No due dates"
    )
    assert [r.stop_reason for r in replies] == ["end_turn"] * 3
    said = editor.text()
    assert said.count("**The planner asks:**") == 2 and "JSON file or SQLite" in said
    assert "- **001-storage-layer**: Storage layer" in said
    assert "- **002-add-and-list-commands**: Add and list commands" in said
    tasks = daemon.call("task.list", {"repo": str(repo)})["tasks"]
    assert [t["title"] for t in tasks] == ["Storage layer", "Add and list commands"]
    assert daemon.call("planning.status", {"repo": str(repo)})["state"] == "idle"
