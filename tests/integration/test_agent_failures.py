"""How a battle meets what the real agent CLIs print when things go wrong (found by running
them): API refusals (429 without a rate_limit_event, 529, 5xx) never burn iterations: the
battle is blocked (seed 003) and waits on the engine's clock (a FakeClock here, moved by
hand), then escalates when the retries run out; subscription auth's
"allowed" rate-limit lines are not output; Codex gets a writable sandbox and its usage
is not counted twice; a missing agent is refused at battle.start."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import RequestFailed
from tests.helpers import DaemonProcess, events_of
from tests.integration.battle_helpers import (
    advance_to,
    fake_clock,
    run_until,
    setup_repo,
    start_until_blocked,
    types,
)

END = {"battle_complete", "battle_failed", "battle_cancelled"}
SLOW: dict[str, Any] = {
    "timeoutMinutes": 30,
    "idleTimeoutMinutes": 30,
}  # never reached on the fake clock


def set_mode(daemon: DaemonProcess, repo: Path, mode: str, var: str = "FAKE_CLAUDE_MODE") -> None:
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": {"env": {var: mode}}}})


def history(daemon: DaemonProcess, repo: Path, task: str) -> dict[str, Any]:
    battle: dict[str, Any] = daemon.call("battle.history", {"repo": str(repo), "taskId": task})[
        "battle"
    ]
    return battle


def chunks(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [c for e in events if e["type"] == "iteration_output" for c in e["payload"]["chunks"]]


def test_a_429_without_rate_limit_event_backs_off_and_burns_no_iteration(
    daemon: DaemonProcess, repo: Path
) -> None:
    clock = fake_clock(daemon)
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "api_429"}, **SLOW)
    start = clock.time()
    with daemon.connect(timeout=60) as conn:
        first = start_until_blocked(daemon, conn, repo, task)
        assert "rate limited (429) until" in first["reason"]
        assert first["retryAt"] == pytest.approx(start + 60) and first["kind"] == "rate_limit"
        assert history(daemon, repo, task)["status"] == "blocked"
        assert (
            daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"]
            == "blocked"
        )
        advance_to(daemon, clock, first["retryAt"])
        # A second 429 in a row waits twice as long.
        second = list(events_of(conn, lambda e: e["type"] == "battle_blocked"))[-1]["payload"]
        assert second["retryAt"] == pytest.approx(clock.time() + 120)
        set_mode(daemon, repo, "complete")
        advance_to(daemon, clock, second["retryAt"])
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert "battle_resumed" in types(rest) and types(rest)[-1] == "battle_complete"
    battle = history(daemon, repo, task)
    # Neither refused run counted against the single iteration allowed.
    assert [i["result"] for i in battle["iterations"]] == ["cancelled", "cancelled", "success"]
    assert "429" in battle["iterations"][0]["error"]
    assert not battle["iterations"][0]["feedbackResults"]  # no loop ran for a refused run
    task_now = daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]
    assert task_now["status"] == "completed"


def test_overloaded_is_retried_then_escalates_after_five_in_a_row(
    daemon: DaemonProcess, repo: Path
) -> None:
    clock = fake_clock(daemon)
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "overloaded"}, **SLOW)
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 2})
        waits = []
        for n in range(1, 5):
            blocked = list(events_of(conn, lambda e: e["type"] == "battle_blocked"))[-1]["payload"]
            assert "overloaded 529" in blocked["reason"] and "retrying at" in blocked["reason"]
            assert (blocked["retry"], blocked["maxRetries"]) == (n, 4)
            waits.append(blocked["retryAt"] - clock.time())
            advance_to(daemon, clock, blocked["retryAt"])
        final = list(events_of(conn, lambda e: e["type"] == "battle_escalated"))[-1]["payload"]
        assert waits == pytest.approx([60, 120, 240, 480])
        escalation = final["escalation"]
        assert escalation["reason"] == "transient_failures"
        assert "failed 5 times in a row" in escalation["message"]
        battle = history(daemon, repo, task)
        assert battle["status"] == "escalated"
        assert [i["result"] for i in battle["iterations"]] == ["cancelled"] * 5
        assert (
            daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"]
            == "escalated"
        )
        # A person answers to retry once the API is back: the battle still has both
        # iterations.
        set_mode(daemon, repo, "complete")
        daemon.call(
            "inbox.answer",
            {
                "id": escalation["deliveryId"],
                "values": {"values": {"action": "retry"}},
            },
        )
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"


def test_a_server_error_is_retried_after_a_backoff(daemon: DaemonProcess, repo: Path) -> None:
    clock = fake_clock(daemon)
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "server_error"}, **SLOW)
    with daemon.connect(timeout=60) as conn:
        blocked = start_until_blocked(daemon, conn, repo, task)
        assert "server error 500" in blocked["reason"]
        set_mode(daemon, repo, "complete")
        advance_to(daemon, clock, blocked["retryAt"])
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"
    assert [i["result"] for i in history(daemon, repo, task)["iterations"]] == [
        "cancelled",
        "success",
    ]


def test_an_allowed_rate_limit_event_is_not_output(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(
        daemon, repo, env={"FAKE_CLAUDE_MODE": "complete", "FAKE_CLAUDE_AUTH": "subscription"}
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    assert not [c for c in chunks(events) if "rate limit" in c["text"]]
    log = daemon.call("battle.log", {"repo": str(repo), "taskId": task, "iteration": 1})
    assert '"rate_limit_event"' in log["data"]  # still in the raw log


def test_codex_runs_in_a_writable_sandbox_and_its_usage_is_not_counted_twice(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    record = home / "record"
    task = setup_repo(
        daemon,
        repo,
        backend="codex",
        fake="fake_codex",
        env={"FAKE_CODEX_MODE": "model_warning", "FAKE_CODEX_RECORD": str(record)},
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    argv = json.loads((record / "argv.json").read_text())
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert "sandbox_workspace_write.network_access=false" in argv
    assert (repo / "codex.txt").read_text() == "hi\n"  # the write went through
    # The non-fatal error item is a notice; the iteration succeeded.
    assert any(
        c["kind"] == "notice" and "Model metadata" in c["text"] for c in chunks(events)
    ) and not any(c["kind"] in ("tool_error", "stderr") for c in chunks(events))
    battle = history(daemon, repo, task)
    assert [i["result"] for i in battle["iterations"]] == ["success"]
    usage = battle["iterations"][0]["usage"]
    assert usage["inputTokens"] == 24763 - 24448 and usage["cacheReadInputTokens"] == 24448
    assert usage["outputTokens"] == 122 and usage["reasoningOutputTokens"] == 64
    # the battle's usage holds the verifier's run too (fake_codex's: 100 input tokens)
    assert battle["usage"]["inputTokens"] == 315 + 100


@pytest.mark.parametrize(
    ("backend", "command", "hint"),
    [
        ("claude", "/nonexistent/claude", "@anthropic-ai/claude-code"),
        ("codex", "no-such-codex-on-path", "@openai/codex"),
    ],
)
def test_battle_start_refuses_a_missing_agent_and_leaves_the_task(
    daemon: DaemonProcess, repo: Path, backend: str, command: str, hint: str
) -> None:
    task = setup_repo(daemon, repo, backend=backend, fake="")
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": {"command": command}}})
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    assert info.value.code == -32014
    assert command in info.value.message and hint in info.value.message
    assert (
        daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"] == "pending"
    )
    assert daemon.call("battle.current", {"repo": str(repo)})["battles"] == []
    assert history(daemon, repo, task) is None
    assert not (repo / ".pokeralph" / "battles" / task).exists()


def test_the_agents_own_path_is_honoured_when_checking(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """agent.env PATH decides where a bare command is found, at start as at run."""
    bin_dir = home / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(Path(__file__).resolve().parents[1] / "fakes" / "fake_claude")
    task = setup_repo(daemon, repo, fake="", env={"FAKE_CLAUDE_MODE": "complete"})
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": {"command": "claude"}}})
    if shutil.which("claude") is None:
        with pytest.raises(RequestFailed):
            daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    daemon.call(
        "config.update",
        {
            "repo": str(repo),
            "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete", "PATH": path}}},
        },
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_the_same_start_error_twice_fails_the_battle_instead_of_burning_iterations(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    """A bad flag, a missing model, a usage error: the agent fails the same way before it
    does anything. Twice in a row ends the battle with the agent's own error (issue 24:
    the real Codex CLI's `cannot be used multiple times` burned every iteration)."""
    bad = _script(
        tmp_path / "bad-agent",
        "cat >/dev/null\n"
        "echo \"error: the argument '--sandbox <MODE>' cannot be used multiple times "
        '(pid $$)" >&2\nexit 2\n',
    )
    task = setup_repo(daemon, repo, backend="command", fake="", maxIterationsPerTask=10)
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": {"command": bad}}})
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_failed"
    battle = history(daemon, repo, task)
    assert [i["result"] for i in battle["iterations"]] == ["failure", "failure"]
    assert "failed the same way twice" in battle["error"]
    assert "cannot be used multiple times" in battle["error"]  # the CLI's own words


def test_failures_that_differ_or_follow_work_keep_their_iterations(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    """An agent that did something (wrote a file, said something) before failing, or
    fails differently each time, is judged by the iteration limit as before."""
    counter = tmp_path / "count"
    worker = _script(
        tmp_path / "working-agent",
        "cat >/dev/null\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n"
        'echo "step $n" > "work-$n.txt"\necho "tried" \necho "broke" >&2\nexit 1\n',
    )
    task = setup_repo(daemon, repo, backend="command", fake="", maxIterationsPerTask=3)
    daemon.call("config.update", {"repo": str(repo), "patch": {"agent": {"command": worker}}})
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_failed"
    battle = history(daemon, repo, task)
    assert [i["result"] for i in battle["iterations"]] == ["failure"] * 3
    assert battle["error"].startswith("max iterations (3)")
