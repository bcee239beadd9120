"""Battles end to end: a real daemon, real git repositories, fake agents that speak the
real tools' formats as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import RequestFailed
from pokeralphd.procenv import marked
from pokeralphd.sandbox import probe
from pokeralphd.settings import DaemonSettings
from tests.helpers import DaemonProcess, events_of, make_git_repo, pid_alive, reap, wait_until
from tests.inproc import ThreadedDaemon
from tests.integration.battle_helpers import (
    advance_to,
    agent_pids,
    fake_clock,
    output_texts,
    run_until,
    setup_repo,
    start_until_blocked,
    types,
)

END = {"battle_complete", "battle_failed", "battle_cancelled"}


def git_log(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_yolo_battle_completes_after_several_iterations_with_commits(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    counter = home / "counter"
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "complete_after:3", "FAKE_CLAUDE_COUNTER": str(counter)},
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[0] == "battle_start" and types(events)[-1] == "battle_complete"
    assert [e["payload"]["iteration"] for e in events if e["type"] == "iteration_start"] == [
        1,
        2,
        3,
    ]
    outputs = [c for e in events if e["type"] == "iteration_output" for c in e["payload"]["chunks"]]
    assert any(c["kind"] == "text" for c in outputs) and any(
        c["kind"] == "tool_use" for c in outputs
    )
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    assert history["status"] == "completed" and len(history["iterations"]) == 3
    assert [i["result"] for i in history["iterations"]] == ["success"] * 3
    last = history["iterations"][-1]
    assert (
        last["completion"]["kind"] in ("sigil", "block")
        and last["feedbackResults"]["test"]["passed"]
    )
    assert (
        history["iterations"][0]["completion"] is None
    )  # the sigil echoed in a tool result is not the agent's
    assert history["costUsd"] > 0 and history["usage"]["outputTokens"] > 0
    commits = git_log(repo)
    assert commits.count(f"[PokéRalph] {task}: Make it work") == 3
    assert all(i["commitHash"] and i["filesChanged"] for i in history["iterations"])
    assert not any(".pokeralph" in f for i in history["iterations"] for f in i["filesChanged"])
    task_now = daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]
    assert task_now["status"] == "completed"
    progress = daemon.call("battle.progress", {"repo": str(repo), "taskId": task})["progress"]
    assert progress["status"] == "completed" and progress["completionDetected"] is True
    log = daemon.call("battle.log", {"repo": str(repo), "taskId": task, "iteration": 2})
    assert '"type":"system"' in log["data"].replace(" ", "") and log["size"] == len(
        log["data"].encode()
    )
    assert daemon.call("battle.current", {"repo": str(repo)})["battles"] == []


def test_hitl_waits_for_approval_and_passes_the_note(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    record = home / "record"
    record.mkdir()
    task = setup_repo(
        daemon,
        repo,
        mode="hitl",
        env={
            "FAKE_CLAUDE_MODE": "complete_after:2",
            "FAKE_CLAUDE_COUNTER": str(home / "c"),
            "FAKE_CLAUDE_RECORD": str(record),
        },
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        seen = list(events_of(conn, lambda e: e["type"] == "await_approval"))
        assert seen[-1]["payload"]["iteration"] == 1
        assert (
            daemon.call("battle.current", {"repo": str(repo)})["battles"][0]["status"]
            == "awaiting_approval"
        )
        assert (
            daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"]
            == "in_progress"
        )
        daemon.call("battle.approve", {"repo": str(repo), "note": "please also add a docstring"})
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert "approval_received" in types(rest) and types(rest)[-1] == "battle_complete"
    prompt = (record / "stdin.txt").read_text()
    assert "please also add a docstring" in prompt and task in prompt


def test_reject_pauses_and_resume_continues_with_the_next_iteration(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup_repo(daemon, repo, mode="hitl", env={"FAKE_CLAUDE_MODE": "progress"})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "await_approval"))
        daemon.call("battle.approve", {"repo": str(repo), "approve": False, "note": "wrong file"})
        paused = list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        assert "wrong file" in paused[-1]["payload"]["reason"]
        assert (
            daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"]
            == "paused"
        )
        daemon.call("battle.resume", {"repo": str(repo)})
        again = list(events_of(conn, lambda e: e["type"] == "await_approval"))
        assert again[-1]["payload"]["iteration"] == 2
        daemon.call("battle.cancel", {"repo": str(repo)})
        list(events_of(conn, lambda e: e["type"] == "battle_cancelled"))
    assert (
        daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"] == "paused"
    )


def test_sigil_with_failing_loops_does_not_complete(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    record = home / "record"
    record.mkdir()
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "complete", "FAKE_CLAUDE_RECORD": str(record)},
        loops={"test": "echo 'AssertionError: 2 != 3'; exit 1"},
        maxIterationsPerTask=2,
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_failed"
    assert "max iterations (2)" in events[-1]["payload"]["error"]
    fb = [e for e in events if e["type"] == "feedback_result"]
    assert (
        fb
        and not fb[0]["payload"]["result"]["passed"]
        and "2 != 3" in fb[0]["payload"]["result"]["output"]
    )
    prompt = (record / "stdin.txt").read_text()
    assert "2 != 3" in prompt and "signalled completion" in prompt
    assert (
        daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"] == "failed"
    )
    # A failed task can be fought again: failed -> pending -> in_progress.
    daemon.call(
        "config.update", {"repo": str(repo), "patch": {"feedbackCommands": {"test": "true"}}}
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    assert (repo / ".pokeralph" / "battles" / task / "history-1.json").is_file()


def test_max_iterations_fails_the_battle(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "progress"})
    events = run_until(
        daemon, ("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 2}), END
    )
    assert types(events)[-1] == "battle_failed"
    assert [e["payload"]["iteration"] for e in events if e["type"] == "iteration_end"] == [1, 2]


def _leads_a_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except ProcessLookupError:
        return False


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if pid_alive(p)]


def test_timeout_ends_the_whole_process_tree(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    clock = fake_clock(daemon)
    pidfile = home / "pids"
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "grandchild", "FAKE_CLAUDE_PIDFILE": str(pidfile)},
        timeoutMinutes=2,
        idleTimeoutMinutes=30,
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        started = clock.monotonic()
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1})
        agent_pids(pidfile)
        advance_to(daemon, clock, started + 120)  # the run timeout, and nothing sooner
        events = list(events_of(conn, lambda e: e["type"] in END))
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert ends[0]["payload"]["result"] == "timeout"
    pids = [int(x) for x in pidfile.read_text().split()]
    assert pids and not _alive(pids)


def test_idle_watchdog_stops_a_silent_agent(daemon: DaemonProcess, repo: Path) -> None:
    clock = fake_clock(daemon)
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "silent_hang"},
        idleTimeoutMinutes=1,
        timeoutMinutes=30,
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        started = clock.monotonic()
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1})
        advance_to(daemon, clock, started + 60)
        events = list(events_of(conn, lambda e: e["type"] in END))
    end = next(e for e in events if e["type"] == "iteration_end")
    assert end["payload"]["result"] == "timeout"


def test_cancel_ends_the_tree_and_nothing_runs_after(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    pidfile = home / "pids"
    task = setup_repo(
        daemon, repo, env={"FAKE_CLAUDE_MODE": "grandchild", "FAKE_CLAUDE_PIDFILE": str(pidfile)}
    )
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "iteration_start"))
        agent_pids(pidfile)
        result = daemon.call("battle.cancel", {"repo": str(repo)})
        assert result["battle"]["status"] == "cancelled"
        rest = list(events_of(conn, lambda e: e["type"] == "battle_cancelled"))
    assert "feedback_result" not in types(rest)
    pids = [int(x) for x in pidfile.read_text().split()]
    assert not _alive(pids)
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    assert history["iterations"][-1]["result"] == "cancelled"


def test_pause_now_and_resume(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "hang"})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "iteration_output"))
        daemon.call("battle.pause", {"repo": str(repo), "now": True})
        list(events_of(conn, lambda e: e["type"] == "battle_paused"))
        history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        assert history["status"] == "paused" and history["iterations"][0]["result"] == "cancelled"
        daemon.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}},
        )
        daemon.call("battle.resume", {"repo": str(repo)})
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert [e["payload"]["iteration"] for e in rest if e["type"] == "iteration_start"] == [2]
    assert types(rest)[-1] == "battle_complete"


def test_one_battle_per_repository(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "hang"})
    daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    assert info.value.code == -32008
    with pytest.raises(RequestFailed) as info:
        daemon.call("task.update", {"repo": str(repo), "taskId": task, "title": "x"})
    assert info.value.code == -32008
    daemon.call("battle.cancel", {"repo": str(repo)})


def test_two_repositories_battle_at_once_and_the_limit_queues(home: Path) -> None:
    daemon = ThreadedDaemon(home, DaemonSettings(max_concurrent_battles=2)).start()
    try:
        repos = [make_git_repo(home / f"r{i}") for i in range(3)]
        tasks = [setup_repo(daemon, r, env={"FAKE_CLAUDE_MODE": "hang"}) for r in repos]
        with daemon.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"types": ["iteration_start", "battle_queued"]})
            for r, t in zip(repos, tasks, strict=True):
                daemon.call("battle.start", {"repo": str(r), "taskId": t})
            got: list[dict[str, object]] = []
            for event in events_of(conn, lambda e: False):
                got.append(event)
                if [e["type"] for e in got].count("iteration_start") == 2 and any(
                    e["type"] == "battle_queued" for e in got
                ):
                    break
            current = {b["repo"]: b["status"] for b in daemon.call("battle.current")["battles"]}
            assert sorted(current.values()) == ["queued", "running", "running"]
            queued = next(r for r, s in current.items() if s == "queued")
            running = next(r for r, s in current.items() if s == "running")
            daemon.call("battle.cancel", {"repo": running})
            started = list(events_of(conn, lambda e: e["type"] == "iteration_start"))
            assert started[-1]["repo"] == queued
        for r in repos:
            if daemon.call("battle.current", {"repo": str(r)})["battles"]:
                daemon.call("battle.cancel", {"repo": str(r)})
    finally:
        daemon.stop()


def test_missing_agent_binary_is_refused_with_the_fix(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup_repo(daemon, repo, fake="", env={})
    daemon.call(
        "config.update",
        {"repo": str(repo), "patch": {"agent": {"command": str(home / "no-such-claude")}}},
    )
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    assert "no-such-claude" in info.value.message and "agent.command" in info.value.message
    assert (
        daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]["status"] == "pending"
    )


def test_agent_error_result_is_an_iteration_failure(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "error_result"})
    events = run_until(
        daemon, ("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 2}), END
    )
    ends = [e["payload"] for e in events if e["type"] == "iteration_end"]
    assert [e["result"] for e in ends] == ["failure", "failure"]
    assert "login" in ends[0]["error"].lower()


@pytest.mark.parametrize(
    ("backend", "fake", "mode"),
    [("codex", "fake_codex", "FAKE_CODEX_MODE"), ("command", "fake_command", "FAKE_COMMAND_MODE")],
)
def test_other_backends_complete(
    daemon: DaemonProcess, repo: Path, backend: str, fake: str, mode: str
) -> None:
    task = setup_repo(daemon, repo, backend=backend, fake=fake, env={mode: "complete"})
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    assert git_log(repo)[0] == f"[PokéRalph] {task}: Make it work"


def test_kill_9_mid_battle_then_restart_and_resume(home: Path, repo: Path) -> None:
    pidfile = home / "pids"
    first = DaemonProcess(home).start()
    task = setup_repo(
        first, repo, env={"FAKE_CLAUDE_MODE": "grandchild", "FAKE_CLAUDE_PIDFILE": str(pidfile)}
    )
    with first.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        first.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "iteration_start"))
        agent_pids(pidfile)
    first.kill9()
    pids = [int(x) for x in pidfile.read_text().split()]
    second = ThreadedDaemon(home).start()  # the restart needs no process of its own
    try:
        try:
            wait_until(lambda: not _alive(pids), 20, "the orphaned agent to be ended")
        finally:
            reap(pids)
        battle = second.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        assert battle["status"] == "paused"
        assert battle["iterations"][0]["result"] == "cancelled"
        assert "daemon stopped" in battle["iterations"][0]["error"]
        for f in (repo / ".pokeralph").rglob("*.json"):
            json.loads(f.read_text())
        second.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}},
        )
        events = run_until(second, ("battle.resume", {"repo": str(repo)}), END)
        assert [e["payload"]["iteration"] for e in events if e["type"] == "iteration_start"] == [2]
        assert types(events)[-1] == "battle_complete"
    finally:
        second.stop()


def test_graceful_stop_leaves_the_battle_paused(home: Path, repo: Path) -> None:
    """The shutdown a SIGTERM starts (test_daemon_lifecycle sends the signals themselves)."""
    first = ThreadedDaemon(home).start()
    task = setup_repo(first, repo, env={"FAKE_CLAUDE_MODE": "hang"})
    with first.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        first.call("battle.start", {"repo": str(repo), "taskId": task})
        list(events_of(conn, lambda e: e["type"] == "iteration_output"))
    assert first.stop() == 0
    second = ThreadedDaemon(home).start()
    try:
        battle = second.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        assert battle["status"] == "paused" and battle["iterations"][0]["result"] == "cancelled"
    finally:
        second.stop()


def test_log_tail_and_huge_output(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "huge"})
    run_until(
        daemon, ("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1}), END
    )
    full = daemon.call(
        "battle.log", {"repo": str(repo), "taskId": task, "iteration": 1, "limit": 1024}
    )
    assert full["size"] > 5_000_000 and len(full["data"]) <= 1024
    tail = daemon.call("battle.log", {"repo": str(repo), "taskId": task, "tail": 3})
    assert (
        tail["data"].count("\n") <= 3
        and tail["offset"] + len(tail["data"].encode()) == tail["size"]
    )
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.log", {"repo": str(repo), "taskId": task, "iteration": 99})
    assert info.value.code == -32015


def test_rejected_rate_limit_blocks_until_the_reset(daemon: DaemonProcess, repo: Path) -> None:
    clock = fake_clock(daemon, start=time.time())  # the fake stamps its reset in real time
    task = setup_repo(
        daemon, repo, env={"FAKE_CLAUDE_MODE": "rate_limited", "FAKE_CLAUDE_RESET": "3600"}
    )
    with daemon.connect(timeout=60) as conn:
        blocked = start_until_blocked(daemon, conn, repo, task)
        assert "rate limited until" in blocked["reason"]
        assert blocked["retryAt"] == pytest.approx(clock.time() + 3600, abs=5)
        daemon.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}},
        )
        advance_to(daemon, clock, blocked["retryAt"])
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert "battle_resumed" in types(rest) and types(rest)[-1] == "battle_complete"
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    # The rate-limited run did not burn the only iteration allowed.
    assert [i["result"] for i in history["iterations"]] == ["cancelled", "success"]


def test_revert_undoes_the_battles_last_commit(daemon: DaemonProcess, repo: Path) -> None:
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "complete"})
    run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert (repo / "work.txt").exists()
    result = daemon.call("battle.revert", {"repo": str(repo), "taskId": task})
    assert result["revertCommit"] and not (repo / "work.txt").exists()
    assert git_log(repo)[0].startswith("Revert")
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.revert", {"repo": str(repo), "taskId": task})
    assert info.value.code == -32016 and "not a PokéRalph commit" in info.value.message


def test_agent_crash_is_a_failed_iteration_and_the_battle_goes_on(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    counter = home / "counter"
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "crash"})
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 3})
        first = list(events_of(conn, lambda e: e["type"] == "iteration_end"))[-1]["payload"]
        assert first["result"] == "failure"
        assert "status 3" in first["error"] and "something broke inside the fake" in first["error"]
        daemon.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "agent": {
                        "env": {
                            "FAKE_CLAUDE_MODE": "complete_after:1",
                            "FAKE_CLAUDE_COUNTER": str(counter),
                        }
                    }
                },
            },
        )
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"


def test_command_agent_with_the_prompt_as_an_argument(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    script = home / "arg_agent.sh"
    script.write_text(
        '#!/bin/sh\necho "got ${#1} bytes"; echo "$1" | grep -q "Task ID:" && echo "<promise>COMPLETE</promise>"\n'
    )
    script.chmod(0o755)
    task = setup_repo(daemon, repo, backend="command", fake="")
    daemon.call(
        "config.update",
        {
            "repo": str(repo),
            # the script cannot verify (it writes no report): the implementation alone
            "patch": {
                "agent": {"command": str(script), "promptVia": "argument"},
                "phases": ["implementation"],
            },
        },
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    text = " ".join(
        c["text"] for e in events if e["type"] == "iteration_output" for c in e["payload"]["chunks"]
    )
    assert "got " in text


def test_kill_9_during_a_feedback_loop_leaves_nothing_running(home: Path, repo: Path) -> None:
    """The loop's process group dies with the daemon at once, the loop's shell and what it
    started in the group: the death watch (:mod:`pokeralphd.deathwatch`) kills it, with no
    second daemon yet (a death signal on the shell alone, as before, left the ``sleep``
    running until the next start). What it started in a session of its own is ended by
    the next daemon at start (its owner mark)."""
    pidfile = home / "loop.pids"
    loop = (
        f"echo $$ > {pidfile}; sleep 301 & echo $! >> {pidfile};"
        f" setsid sleep 300 & echo $! >> {pidfile}; wait"
    )
    first = DaemonProcess(home).start()
    task = setup_repo(first, repo, env={"FAKE_CLAUDE_MODE": "complete"}, loops={"test": loop})
    first.call("battle.start", {"repo": str(repo), "taskId": task})
    wait_until(
        lambda: pidfile.exists() and len(pidfile.read_text().split()) >= 3, 30, "the loop's pids"
    )
    pids = [int(x) for x in pidfile.read_text().split()]
    in_group, own_session = pids[:2], pids[2:]
    # setsid(1) may not have left the loop's session yet: then the watch would kill it too
    wait_until(lambda: _leads_a_session(own_session[0]), 10, "the sleep's own session")
    first.kill9()
    try:
        wait_until(lambda: not _alive(in_group), 20, "the loop's group to end with the daemon")
        assert _alive(own_session)  # not the watch's: the next start's
        second = DaemonProcess(home).start()
        try:
            wait_until(lambda: not _alive(own_session), 20, "the orphaned sleep to be ended")
        finally:
            second.stop()
    finally:
        reap(pids)


@pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}")
def test_kill_9_during_a_confined_feedback_loop_leaves_nothing_running(
    home: Path, repo: Path
) -> None:
    """Under the sandbox the death watch has no part in the run: bubblewrap dies with the
    daemon by itself (``--die-with-parent``) and its pid namespace ends with it, a process that
    left the loop's session included. No second daemon is started: nothing sweeps."""
    var, value = "POKERALPH_TEST_MARK", f"confined-{time.monotonic_ns()}"
    tag = f"env {var}={value}"
    loop = f"{tag} setsid sleep 300 & {tag} sleep 301 & wait"
    daemon = DaemonProcess(home, ["--sandbox"]).start()
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "complete"}, loops={"test": loop})
    daemon.call("battle.start", {"repo": str(repo), "taskId": task})

    def sleeping() -> list[int]:
        return [pid for pid, seen in marked(var) if seen == value]

    pids = wait_until(lambda: len(sleeping()) == 2 and sleeping(), 30, "the loop's sleeps")
    daemon.kill9()
    try:
        wait_until(lambda: not _alive(pids), 20, "the confined loop to die with the daemon")
    finally:
        reap(pids)


def _shell_agent(daemon: DaemonProcess, repo: Path, script: Path, body: str, **patch: Any) -> str:
    """A task of ``repo`` whose agent is the shell script ``body`` (after reading its
    prompt), implementation only; ``patch`` adds config keys."""
    script.write_text("#!/bin/sh\ncat > /dev/null\n" + body)
    script.chmod(0o755)
    task = setup_repo(daemon, repo, backend="command", fake="")
    config = {"agent": {"command": str(script)}, "phases": ["implementation"], **patch}
    daemon.call("config.update", {"repo": str(repo), "patch": config})
    return task


def test_a_plain_text_agents_completion_block_over_many_lines_is_read(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """The prompt shows the completion block pretty-printed, over many lines; a plain-text
    agent that prints it so (and no sigil) completes the battle, and its block (summary,
    evidence) is the iteration's completion. Its words arrive line by line: the block
    was looked for in each line alone, and never found."""
    block = {
        "type": "BATTLE_COMPLETE",
        "version": 1,
        "summary": "wrote work.txt",
        "acceptanceCriteriaMet": [{"criterion": "work.txt exists", "met": True, "evidence": "ls"}],
        "filesChanged": ["work.txt"],
        "testsAdded": [],
        "confidence": 0.9,
        "notes": "",
    }
    printed = "<completion>" + json.dumps(block, indent=2) + "</completion>"
    task = _shell_agent(
        daemon,
        repo,
        home / "blocky.sh",
        f"echo hi > work.txt\ncat <<'EOF'\nAll done.\n{printed}\nEOF\n",
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete", events[-1]
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    completion = history["iterations"][-1]["completion"]
    assert completion["kind"] == "block" and completion["summary"] == "wrote work.txt"
    assert completion["acceptanceCriteriaMet"][0]["evidence"] == "ls"


def test_progress_holds_the_agents_last_words(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """progress.json's ``logs`` (the last 50 lines, stripped) and ``lastOutput`` after a
    chatty iteration: the words are put into progress when it is written, not per line,
    and none of the last ones is missed at the iteration's end."""
    task = _shell_agent(
        daemon,
        repo,
        home / "chatty.sh",
        'i=1; while [ $i -le 80 ]; do echo "  line $i  "; i=$((i+1)); done\n'
        "echo '<promise>COMPLETE</promise>'\n",
    )
    run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    progress = json.loads((repo / ".pokeralph" / "battles" / task / "progress.json").read_text())
    assert progress["logs"] == [f"line {i}" for i in range(32, 81)] + [
        "<promise>COMPLETE</promise>"
    ]
    assert progress["lastOutput"] == "<promise>COMPLETE</promise>"


def test_a_failed_auto_commit_is_said_and_the_iteration_stands(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """The commit fails (a lock file git refuses to work past): the iteration is still
    recorded with the files it changed and no commit, and the failure is said in its
    output."""
    task = _shell_agent(
        daemon,
        repo,
        home / "locking_agent.sh",
        "echo work > work.txt\ntouch .git/index.lock\necho '<promise>COMPLETE</promise>'\n",
        autoCommit=True,
    )
    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    assert types(events)[-1] == "battle_complete"
    notices = output_texts(events, "notice")
    assert any(n.startswith("auto-commit failed: git commit failed") for n in notices), notices
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
    [record] = history["iterations"]
    assert record["result"] == "success" and record["filesChanged"] == ["work.txt"]
    assert record["commitHash"] is None
    assert git_log(repo) == [git_log(repo)[-1]]  # the first commit only
