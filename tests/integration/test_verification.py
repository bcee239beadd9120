"""Seed 003's verification and review phases, with agents that speak the real CLI's
stream-json: fake_claude implements, tests/fakes/fake_reviewer plays the QA agent and the
reviewer from a script of steps (one per run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.client import RequestFailed
from tests.helpers import FAKES, DaemonProcess
from tests.integration.battle_helpers import (
    output_texts,
    printing_agent,
    run_until,
    setup_repo,
    types,
)

END = {"battle_complete", "battle_failed", "battle_cancelled", "battle_escalated"}


def role(home: Path, name: str, steps: list[Any]) -> dict[str, Any]:
    """An agent config that plays ``name`` (verifier, reviewer) by ``steps``."""
    script = home / f"{name}.json"
    script.write_text(json.dumps(steps))
    return {
        "backend": "claude",
        "command": str(FAKES / "fake_reviewer"),
        "env": {"FAKE_REVIEWER_SCRIPT": str(script), "FAKE_REVIEWER_RECORD": str(home / name)},
    }


def setup(
    daemon: DaemonProcess,
    repo: Path,
    home: Path,
    verifier: list[Any] | None = None,
    reviewer: list[Any] | None = None,
    phases: list[str] | None = None,
    **config: Any,
) -> str:
    roles = {}
    if verifier is not None:
        roles["verifier"] = role(home, "verifier", verifier)
    if reviewer is not None:
        roles["reviewer"] = role(home, "reviewer", reviewer)
    return setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "complete", "FAKE_CLAUDE_RECORD": str(home / "implementer")},
        phases=phases or ["implementation", "verification"],
        roles=roles,
        **config,
    )


def start(daemon: DaemonProcess, repo: Path, task: str, **params: Any) -> list[dict[str, Any]]:
    call = ("battle.start", {"repo": str(repo), "taskId": task, **params})
    return run_until(daemon, call, END, repo=str(repo))


def history(daemon: DaemonProcess, repo: Path, task: str) -> dict[str, Any]:
    battle: dict[str, Any] = daemon.call("battle.history", {"repo": str(repo), "taskId": task})[
        "battle"
    ]
    return battle


def payloads(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["type"] == kind]


def prompts(home: Path, who: str) -> list[str]:
    folder = home / who
    pattern = "stdin-*.txt" if who == "implementer" else "prompt-*.txt"
    files = sorted(folder.glob(pattern), key=lambda p: int(p.stem.split("-")[1]))
    return [p.read_text() for p in files]


def test_verification_approves_and_the_battle_completes(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(daemon, repo, home, verifier=["approve"])
    events = start(daemon, repo, task)
    flow = [t for t in types(events) if t not in ("iteration_start", "iteration_end")]
    assert flow[-4:] == ["phase_changed", "verification_report", "phase_changed", "battle_complete"]
    changes = payloads(events, "phase_changed")
    assert [(c["previous"], c["phase"], c["cycle"]) for c in changes] == [
        ("implementation", "verification", 1),
        ("verification", "done", None),
    ]
    (report_event,) = payloads(events, "verification_report")
    assert report_event["passed"] and report_event["outcome"] == "approve"
    assert report_event["criteria"] == {"passed": 2, "failed": 0, "blocked": 0}
    # The report is its own versioned document, written atomically.
    path = repo / ".pokeralph" / "battles" / task / "verification" / "report-1.json"
    assert report_event["path"] == str(path)
    raw = json.loads(path.read_text())
    assert (raw["schemaVersion"], raw["version"], raw["valid"]) == (1, 1, True)
    assert [c["status"] for c in raw["acceptanceCriteria"]] == ["passed", "passed"]
    assert raw["agent"]["backend"] == "claude" and raw["agent"]["costUsd"] == 0.005
    got = daemon.call("battle.report", {"repo": str(repo), "taskId": task, "phase": "verification"})
    assert got["report"]["cycle"] == 1 and got["version"] == 1
    battle = history(daemon, repo, task)
    assert battle["status"] == "completed" and battle["phase"] == "done"
    assert battle["phases"] == ["implementation", "verification"]
    assert battle["verification"]["count"] == 1
    assert battle["verification"]["reports"][0]["outcome"] == "approve"
    assert battle["costUsd"] == pytest.approx(0.0125 + 0.005)  # implementer and verifier
    # The QA agent saw the task, its criteria, the loops' results and the diff.
    (qa,) = prompts(home, "verifier")
    assert qa.startswith("Role: verifier (pokeralph verification, cycle 1 of 3)")
    assert "1. work.txt exists\n2. tests pass" in qa
    assert "- test (`true`): passed" in qa
    assert "+run 1" in qa and "work.txt" in qa
    assert battle["baseCommit"] and battle["baseCommit"][:12] in qa
    # and its output reached subscribers, marked with its phase
    assert any(
        e["payload"].get("phase") == "verification"
        for e in events
        if e["type"] == "iteration_output"
    )


def test_changes_requested_twice_reach_the_implementer_then_approve(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(daemon, repo, home, verifier=["request_changes", "request_changes", "approve"])
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_complete"
    reports = payloads(events, "verification_report")
    assert [(r["cycle"], r["outcome"], r["passed"]) for r in reports] == [
        (1, "request_changes", False),
        (2, "request_changes", False),
        (3, "approve", True),
    ]
    assert reports[0]["criteria"] == {"passed": 1, "failed": 1, "blocked": 0}
    phases = [(c["phase"], c["reason"]) for c in payloads(events, "phase_changed")]
    assert phases.count(("implementation", "the verification asked for changes")) == 2
    # Each rejection's findings went into the next implementation prompt.
    implementer = prompts(home, "implementer")
    assert len(implementer) == 3
    assert "FINDING-" not in implementer[0]
    assert "Changes the verifier (QA) asked for (verification cycle 1)" in implementer[1]
    assert "FINDING-1: the first criterion is not met" in implementer[1]
    assert "(work.txt:1)" in implementer[1]
    assert "FINDING-2" in implementer[2] and "FINDING-1" not in implementer[2]
    # The verifier saw its own earlier reports.
    assert "cycle 2: request_changes" in prompts(home, "verifier")[2]
    battle = history(daemon, repo, task)
    assert battle["verification"]["count"] == 3 and battle["findings"] is None
    assert [i["result"] for i in battle["iterations"]] == ["success"] * 3
    for n in (1, 2, 3):
        assert (
            repo / ".pokeralph" / "battles" / task / "verification" / f"report-{n}.json"
        ).exists()


def test_an_unusable_report_is_a_failed_verification_and_runs_again(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """No report, broken JSON, a criterion left out: never an approval; the verification
    runs again (the implementer has nothing to act on) and each counts as a cycle."""
    task = setup(
        daemon,
        repo,
        home,
        verifier=["missing", "bad_json", "omit_criterion"],
        maxVerificationCycles=3,
    )
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_escalated"
    reports = payloads(events, "verification_report")
    assert [(r["valid"], r["passed"], r["outcome"]) for r in reports] == [
        (False, False, "invalid")
    ] * 3
    problems = [r["problem"] for r in reports]
    assert "no <verification-report> block" in problems[0]
    assert "not valid JSON" in problems[1]
    assert "acceptance criterion 2 ('tests pass') is not in the report" in problems[2]
    battle = history(daemon, repo, task)
    assert len(battle["iterations"]) == 1  # the implementer was not sent back
    assert "Your last report could not be used" in prompts(home, "verifier")[1]
    raw = daemon.call(
        "battle.report", {"repo": str(repo), "taskId": task, "phase": "verification", "cycle": 1}
    )["report"]
    assert raw["valid"] is False and "seems fine" in raw["raw"]
    daemon.call("battle.cancel", {"repo": str(repo)})


def test_a_blocking_review_comment_sends_the_battle_back(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(
        daemon,
        repo,
        home,
        verifier=["approve"],
        reviewer=["approve_blocking", "comment"],
        phases=["implementation", "verification", "review"],
    )
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_complete"
    reviews = payloads(events, "review_report")
    # "approve" with a blocking comment is changes requested; "comment" alone passes
    assert [(r["assessment"], r["blocking"], r["passed"]) for r in reviews] == [
        ("approve", 1, False),
        ("comment", 0, True),
    ]
    flow = [c["phase"] for c in payloads(events, "phase_changed")]
    assert flow == [
        "verification",
        "review",
        "implementation",
        "verification",
        "review",
        "done",
    ]
    implementer = prompts(home, "implementer")
    assert "Changes the code reviewer asked for (review cycle 1)" in implementer[1]
    assert "[blocking] (work.txt:1) REVIEW-1: the change is not safe" in implementer[1]
    reviewer = prompts(home, "reviewer")
    assert reviewer[0].startswith("Role: reviewer (pokeralph review, cycle 1 of 2)")
    battle = history(daemon, repo, task)
    assert (battle["verification"]["count"], battle["review"]["count"]) == (2, 2)
    report = daemon.call(
        "battle.report", {"repo": str(repo), "taskId": task, "phase": "review", "cycle": 1}
    )["report"]
    assert report["comments"][0]["blocking"] and report["comments"][0]["file"] == "work.txt"


def test_what_a_role_changes_in_the_tree_is_put_back(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    task = setup(daemon, repo, home, verifier=["edit"])
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_complete"
    assert (repo / "work.txt").read_text() == "run 1\n"  # as the implementer committed it
    assert not (repo / "reviewer-notes.txt").exists()
    report = daemon.call(
        "battle.report", {"repo": str(repo), "taskId": task, "phase": "verification"}
    )["report"]
    assert sorted(report["discardedChanges"]) == ["reviewer-notes.txt", "work.txt"]
    notices = output_texts(events, "notice")
    assert any("put back" in n for n in notices)


def test_phases_are_configurable_and_checked(daemon: DaemonProcess, repo: Path, home: Path) -> None:
    task = setup(daemon, repo, home, verifier=["approve"], phases=["implementation"])
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_complete"
    assert not payloads(events, "verification_report")
    assert not (home / "verifier").exists()  # no QA run at all
    for bad, why in (
        (["verification"], "must start with implementation"),
        (["implementation", "review", "verification"], "in the order"),
        (["implementation", "implementation"], "unique"),
        (["implementation", "release"], "verification"),
    ):
        with pytest.raises(RequestFailed) as info:
            daemon.call("config.update", {"repo": str(repo), "patch": {"phases": bad}})
        assert info.value.code == -32602 and why in info.value.message
        assert info.value.data["field"].startswith("phases")
    # the default: implementation and verification
    daemon.call("config.update", {"repo": str(repo), "patch": {"phases": None}})
    config = daemon.call("config.get", {"repo": str(repo)})["config"]
    assert config["phases"] == ["implementation", "verification"]
    assert (config["maxVerificationCycles"], config["maxReviewCycles"]) == (3, 2)


def test_a_plain_text_reviewer_writing_its_report_over_many_lines_is_read(
    daemon: DaemonProcess, repo: Path, home: Path
) -> None:
    """A plain-text reviewer (the command backend) prints its report pretty-printed, over
    many lines; its words arrive a line at a time, and the report was looked for in each
    line alone: never found, so the review failed and the battle was escalated."""
    report = {"assessment": "approve", "comments": [], "feedback": {"message": "looks good"}}
    printed = f"Reviewed.\n<review-report>\n{json.dumps(report, indent=2)}\n</review-report>"
    script = printing_agent(home / "reviewer.sh", printed)
    task = setup_repo(
        daemon,
        repo,
        env={"FAKE_CLAUDE_MODE": "complete"},
        phases=["implementation", "review"],
        roles={"reviewer": {"backend": "command", "command": str(script)}},
    )
    events = start(daemon, repo, task)
    assert types(events)[-1] == "battle_complete", events[-1]
    battle = history(daemon, repo, task)
    assert battle["review"]["count"] == 1
    assert battle["review"]["reports"][-1]["outcome"] == "approve"
    got = daemon.call("battle.report", {"repo": str(repo), "taskId": task, "phase": "review"})
    assert got["report"]["valid"] and got["report"]["feedback"]["message"] == "looks good"
