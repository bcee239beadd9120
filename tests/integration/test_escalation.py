"""Seed 003's escalation and transient failures: cycles that run out ask a person through
the inbox (answered once), transient failures block and retry without burning an
iteration or a cycle, a daemon killed during verification resumes it, and the files of
schema 1 still load."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import Connection, RequestFailed
from tests.helpers import DaemonProcess, events_of, pid_alive, reap, wait_until
from tests.inproc import ThreadedDaemon
from tests.integration.battle_helpers import (
    advance_to,
    fake_clock,
    setup_repo,
    start_until_blocked,
    types,
)
from tests.integration.test_agent_failures import SLOW
from tests.integration.test_verification import (
    END,
    history,
    payloads,
    prompts,
    role,
    setup,
    start,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def answer(daemon: DaemonProcess, delivery: str, action: str, guidance: str = "") -> Any:
    values: dict[str, Any] = {"action": action}
    if guidance:
        values["guidance"] = guidance
    return daemon.call("inbox.answer", {"id": delivery, "values": {"values": values}})


def retried_and_approved(
    daemon: DaemonProcess,
    conn: Connection,
    clock: Any,
    blocked: dict[str, Any],
    repo: Path,
    task: str,
) -> Any:
    """Advance the clock to the blocked battle's retry and wait for its end: it completes,
    with one verification cycle, approving. The battle's history."""
    advance_to(daemon, clock, blocked["retryAt"])
    rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"
    battle = history(daemon, repo, task)
    assert battle["verification"]["count"] == 1
    assert battle["verification"]["reports"][0]["outcome"] == "approve"
    return battle


def escalated(events: list[dict[str, Any]]) -> dict[str, Any]:
    escalation: dict[str, Any] = payloads(events, "battle_escalated")[-1]["escalation"]
    return escalation


def test_three_rejections_escalate_and_retry_with_guidance_resumes_once(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(daemon, repo, home, verifier=["request_changes"] * 3 + ["approve"])
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_escalated"
    assert len(payloads(events, "verification_report")) == 3
    escalation = escalated(events)
    assert escalation["reason"] == "verification_cycles" and escalation["number"] == 1
    assert "3 verifications did not pass" in escalation["message"]
    battle = history(daemon, repo, task)
    assert battle["status"] == "escalated" and battle["phase"] == "verification"
    task_now = daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]
    assert task_now["status"] == "escalated"
    # a blocking inbox form: the choice and the guidance
    item = daemon.call("inbox.get", {"id": escalation["deliveryId"]})["delivery"]
    assert item["mode"] == "blocking" and item["source"]["kind"] == "battle_escalation"
    fields = {f["name"]: f for f in item["feedbackSchema"]["fields"]}
    assert fields["action"]["options"] == ["retry", "accept", "cancel"]
    assert fields["guidance"]["type"] == "textarea"
    assert "FINDING-3" in item["content"]["body"]
    # the battle cannot be resumed or paused around the person
    for method in ("battle.resume", "battle.pause"):
        with pytest.raises(RequestFailed) as info:
            daemon.call(method, {"repo": str(repo)})
        assert escalation["deliveryId"] in info.value.message
    summary = daemon.call("battle.current", {"repo": str(repo)})["battles"][0]
    assert summary["phase"] == "verification" and summary["escalation"]["number"] == 1

    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        answer(daemon, escalation["deliveryId"], "retry", "USE THE SMALLER FIX")
        # the answer is consumed once: a second one is refused, the battle goes on once
        with pytest.raises(RequestFailed) as info:
            answer(daemon, escalation["deliveryId"], "accept")
        assert "already answered" in info.value.message
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"
    resolved = payloads(rest, "escalation_resolved")
    assert len(resolved) == 1 and resolved[0]["action"] == "retry"
    assert resolved[0]["guidance"] == "USE THE SMALLER FIX"
    assert len(payloads(rest, "battle_resumed")) == 1
    # the guidance (and the last findings) reached the implementer
    last = prompts(home, "implementer")[-1]
    assert "Guidance from a person, after the battle was escalated" in last
    assert "USE THE SMALLER FIX" in last and "FINDING-3" in last
    battle = history(daemon, repo, task)
    assert battle["status"] == "completed" and battle["verification"]["count"] == 4
    assert battle["verification"]["limit"] == 6  # the retry gave a new budget of cycles
    (record,) = battle["escalations"]
    assert record["resolution"]["action"] == "retry" and record["resolution"]["applied"]
    assert record["resolution"]["deliveryId"] == escalation["deliveryId"]


@pytest.mark.parametrize(("action", "final"), [("accept", "completed"), ("cancel", "cancelled")])
def test_an_escalation_answered_accept_or_cancel(
    daemon: DaemonProcess, repo: Path, home: Path, action: str, final: str
) -> None:
    task = setup(daemon, repo, home, verifier=["request_changes"], maxVerificationCycles=1)
    events = start(daemon, repo, task)
    escalation = escalated(events)
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        answer(daemon, escalation["deliveryId"], action)
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == f"battle_{'complete' if final == 'completed' else final}"
    battle = history(daemon, repo, task)
    assert battle["status"] == final
    assert battle["phase"] == ("done" if action == "accept" else "verification")
    task_now = daemon.call("task.get", {"repo": str(repo), "taskId": task})["task"]
    assert task_now["status"] == ("completed" if action == "accept" else "paused")
    assert daemon.call("battle.current", {"repo": str(repo)})["battles"] == []


def test_a_battle_cancelled_while_escalated_closes_its_inbox_item(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(daemon, repo, home, verifier=["request_changes"], maxVerificationCycles=1)
    escalation = escalated(start(daemon, repo, task))
    daemon.call("battle.cancel", {"repo": str(repo)})
    item = daemon.call("inbox.get", {"id": escalation["deliveryId"]})["delivery"]
    assert item["status"] == "completed"
    with pytest.raises(RequestFailed):
        answer(daemon, escalation["deliveryId"], "retry")
    assert history(daemon, repo, task)["status"] == "cancelled"


@pytest.mark.parametrize("step", ["exit:23", "exit:124", "connection", "overloaded"])
def test_a_transient_verifier_failure_blocks_and_retries_without_burning_a_cycle(
    daemon: DaemonProcess, repo: Path, home: Path, step: str
) -> None:
    clock = fake_clock(daemon)
    task = setup(daemon, repo, home, verifier=[step, "approve"], **SLOW)
    with daemon.connect(timeout=60) as conn:
        blocked = start_until_blocked(daemon, conn, repo, task)
        assert blocked["phase"] == "verification" and blocked["retry"] == 1
        assert blocked["retryAt"] == pytest.approx(clock.time() + 60)
        battle = history(daemon, repo, task)
        assert battle["status"] == "blocked" and battle["blocked"]["kind"] in (
            "exit_code",
            "connection",
            "overloaded",
        )
        summary = daemon.call("battle.current", {"repo": str(repo)})["battles"][0]
        assert summary["status"] == "blocked" and summary["retryAt"] == blocked["retryAt"]
        battle = retried_and_approved(daemon, conn, clock, blocked, repo, task)
    # the failed run wrote no report and counted no cycle
    assert battle["transientFailures"] == 0 and battle["blocked"] is None


def test_a_rate_limited_verifier_waits_for_the_reset_without_burning_a_cycle(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """A rate limit the CLI announced (its rejected rate_limit_event) in a verifier's run
    blocks the battle until the reset, as in an implementation iteration: it once counted
    as an invalid report, and the phase ran again at once, using up its cycles."""
    clock = fake_clock(daemon, start=time.time())  # the fake stamps its reset in real time
    task = setup(daemon, repo, home, verifier=["rate_limited", "approve"], maxVerificationCycles=1)
    with daemon.connect(timeout=60) as conn:
        blocked = start_until_blocked(daemon, conn, repo, task)
        assert blocked["phase"] == "verification" and blocked["kind"] == "rate_limit"
        assert blocked["retryAt"] == pytest.approx(clock.time() + 3600, abs=5)
        assert history(daemon, repo, task)["verification"]["count"] == 0
        retried_and_approved(daemon, conn, clock, blocked, repo, task)


def test_a_transient_exit_code_of_the_implementer_burns_no_iteration(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    fake_clock(daemon)  # the backoff would wait on it; battle.resume cuts it short
    task = setup_repo(daemon, repo, env={"FAKE_CLAUDE_MODE": "exit:124"}, **SLOW)
    with daemon.connect(timeout=60) as conn:
        blocked = start_until_blocked(daemon, conn, repo, task)
        assert blocked["kind"] == "exit_code" and blocked["phase"] == "implementation"
        assert "transient exit status" in blocked["reason"]
        daemon.call(
            "config.update",
            {"repo": str(repo), "patch": {"agent": {"env": {"FAKE_CLAUDE_MODE": "complete"}}}},
        )
        # battle.resume retries at once, without waiting out the backoff
        daemon.call("battle.resume", {"repo": str(repo)})
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"
    battle = history(daemon, repo, task)
    assert [i["result"] for i in battle["iterations"]] == ["cancelled", "success"]
    assert "status 124" in battle["iterations"][0]["error"]


def test_kill_9_during_verification_then_resume_runs_it_again(home: Path, repo: Path) -> None:
    pidfile = home / "reviewer.pid"
    first = DaemonProcess(home).start()
    try:
        verifier = role(home, "verifier", ["hang", "approve"])
        verifier["env"]["FAKE_REVIEWER_PIDFILE"] = str(pidfile)
        task = setup_repo(
            first,
            repo,
            env={"FAKE_CLAUDE_MODE": "complete"},
            roles={"verifier": verifier},
        )
        first.call("battle.start", {"repo": str(repo), "taskId": task})
        # the pid once written whole (the file is made first, then written)
        wait_until(
            lambda: pidfile.exists() and pidfile.read_text().endswith("\n"),
            30,
            "the verifier to start",
        )
        reviewer_pid = int(pidfile.read_text())
        battle = json.loads((repo / ".pokeralph" / "battles" / task / "history.json").read_text())
        assert battle["phase"] == "verification"
    finally:
        first.kill9()
    second = ThreadedDaemon(home).start()  # the restart needs no process of its own
    try:
        # the orphaned verifier was ended; nothing of a report was written
        try:
            wait_until(lambda: not pid_alive(reviewer_pid), 20, "the orphaned verifier to end")
        finally:
            reap([reviewer_pid])
        folder = repo / ".pokeralph" / "battles" / task / "verification"
        assert not list(folder.glob("report-*")) and not list(folder.glob(".*.tmp"))
        battle = history(second, repo, task)
        assert battle["status"] == "paused" and battle["phase"] == "verification"
        assert battle["verification"]["count"] == 0
        with second.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"repo": str(repo)})
            second.call("battle.resume", {"repo": str(repo)})
            rest = list(events_of(conn, lambda e: e["type"] in END))
        assert types(rest)[-1] == "battle_complete"
        (report,) = payloads(rest, "verification_report")
        assert report["cycle"] == 1 and report["passed"]
        assert len(history(second, repo, task)["iterations"]) == 1  # no iteration again
    finally:
        second.stop()


def test_the_files_of_schema_1_are_restored_and_migrated(daemon: DaemonProcess, repo: Path) -> None:
    """A frozen copy of today's files (schema 1): the PRD, a completed battle."""
    folder = repo / ".pokeralph"
    battles = folder / "battles"
    (battles / "001-implement-text-statistics").mkdir(parents=True)
    shutil.copy(FIXTURES / "v1" / "prd.json", folder / "prd.json")
    for name in ("history.json", "progress.json"):
        shutil.copy(FIXTURES / "v1" / name, battles / "001-implement-text-statistics" / name)
    daemon.call("repo.register", {"path": str(repo)})
    battle = history(daemon, repo, "001-implement-text-statistics")
    assert battle["status"] == "completed" and battle["phase"] == "done"
    assert battle["phases"] == ["implementation"] and battle["escalations"] == []
    assert len(battle["iterations"]) == 2
    tasks = daemon.call("task.list", {"repo": str(repo)})["tasks"]
    assert [t["status"] for t in tasks] == ["completed"]
    # a write stores the current schema
    daemon.call("task.update", {"repo": str(repo), "taskId": tasks[0]["id"], "priority": 7})
    assert json.loads((folder / "prd.json").read_text())["schemaVersion"] == 2


def test_a_running_battle_of_schema_1_recovers_in_its_implementation(
    home: Path, repo: Path
) -> None:
    folder = repo / ".pokeralph"
    task = "001-implement-text-statistics"
    (folder / "battles" / task).mkdir(parents=True)
    prd = json.loads((FIXTURES / "v1" / "prd.json").read_text())
    prd["tasks"][0]["status"] = "in_progress"
    (folder / "prd.json").write_text(json.dumps(prd))
    running = json.loads((FIXTURES / "v1" / "history.json").read_text())
    running.update(status="running", completedAt=None, durationMs=None)
    (folder / "battles" / task / "history.json").write_text(json.dumps(running))
    # Daemons in this process: what is tested is a start reading the files (no process
    # boundary is involved), and a daemon process's start is an interpreter's.
    daemon = ThreadedDaemon(home).start()
    try:
        daemon.call("repo.register", {"path": str(repo)})
        daemon.stop()
        daemon = ThreadedDaemon(home).start()  # recovery runs at start
        battle = history(daemon, repo, task)
        assert battle["status"] == "paused" and battle["phase"] == "implementation"
        assert battle["verification"]["count"] == 0
        raw = json.loads((folder / "battles" / task / "history.json").read_text())
        assert raw["schemaVersion"] == 2
    finally:
        daemon.stop()


def test_battle_resolve_answers_the_escalation_and_settles_its_inbox_item(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(
        daemon, repo, home, verifier=["request_changes", "approve"], maxVerificationCycles=1
    )
    escalation = escalated(start(daemon, repo, task))
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        resolved = daemon.call(
            "battle.resolve",
            {"repo": str(repo), "action": "retry", "guidance": "TRY THE OTHER WAY"},
        )
        assert resolved["battle"]["escalations"][-1]["resolution"]["action"] == "retry"
        # once: neither a second resolve nor the inbox item can answer it again
        with pytest.raises(RequestFailed) as info:
            daemon.call("battle.resolve", {"repo": str(repo), "taskId": task, "action": "cancel"})
        assert info.value.code == -32016
        with pytest.raises(RequestFailed):
            answer(daemon, escalation["deliveryId"], "accept")
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_complete"
    item = daemon.call("inbox.get", {"id": escalation["deliveryId"]})
    assert item["delivery"]["status"] == "completed"
    assert item["feedback"][-1]["values"]["values"]["action"] == "retry"
    assert "TRY THE OTHER WAY" in prompts(home, "implementer")[-1]


def test_an_answer_the_inbox_cannot_record_is_still_acted_on(
    daemon: DaemonProcess, repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settling the inbox item after `battle resolve` is bookkeeping: a disk that refuses
    it is logged, and the person's answer still cancels the battle (it once stayed
    escalated, with its answer saved, so that a second resolve was refused)."""
    from pokeralphd.errors import StorageError
    from pokeralphd.inbox.battle_hooks import InboxEscalations

    async def refused(*args: Any) -> None:
        raise StorageError("the disk is full")

    monkeypatch.setattr(InboxEscalations, "answered", refused)
    task = setup(
        daemon, repo, home, verifier=["request_changes", "approve"], maxVerificationCycles=1
    )
    escalated(start(daemon, repo, task))
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.resolve", {"repo": str(repo), "taskId": task, "action": "cancel"})
        rest = list(events_of(conn, lambda e: e["type"] in END))
    assert types(rest)[-1] == "battle_cancelled"
    assert any(
        "could not record it: the disk is full" in line for line in daemon.logs().splitlines()
    )
