"""Seed 003's pieces that need no daemon: reading a report out of the agent's words, the
status table with ``blocked`` and ``escalated``, phases, transient failures, prompts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from pokeralph_core.config.model import Config
from pokeralphd.agents.base import AgentOutcome, AgentResult
from pokeralphd.battle.judging import agent_words
from pokeralphd.battle.phases import backoff_delay, findings_of, next_phase
from pokeralphd.battle.prompt import build_task_prompt
from pokeralphd.battle.reports import (
    parse_review,
    parse_verification,
    review_passed,
    verification_passed,
)
from pokeralphd.battle.transient import transient_failure
from pokeralphd.domain.models import PRD, Task
from pokeralphd.domain.statuses import (
    BATTLE_TRANSITIONS,
    BattleStatus,
    IllegalTransition,
    TaskStatus,
    battle_path,
    check_battle_transition,
    check_task_transition,
    task_path_for_battle,
)

B, T = BattleStatus, TaskStatus
CRITERIA = ["work.txt exists", "tests pass"]
BASE: dict[str, Any] = {
    "taskId": "001-make-it-work",
    "cycle": 1,
    "createdAt": datetime(2026, 11, 23, tzinfo=UTC),
}


def verification(**overrides: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "testResults": {"summary": {"passed": 2, "total": 2}},
        "acceptanceCriteria": [
            {"id": 1, "criterion": "work.txt exists", "status": "passed", "evidence": "ls"},
            {"id": 2, "criterion": "tests pass", "status": "passed", "evidence": "pytest"},
        ],
        "recommendation": "approve",
        "feedback": {"summary": "fine", "items": []},
    }
    report.update(overrides)
    return report


def tagged(report: Any, tag: str = "verification-report") -> str:
    body = report if isinstance(report, str) else json.dumps(report)
    return f"Done.\n<{tag}>{body}</{tag}>"


def test_an_approving_report_passes() -> None:
    report = parse_verification([tagged(verification())], CRITERIA, BASE)
    assert report.valid and verification_passed(report)
    assert [c.id for c in report.acceptance_criteria] == [1, 2]
    assert report.task_id == "001-make-it-work" and report.cycle == 1


def test_criteria_match_by_text_or_number_and_extra_keys_are_dropped() -> None:
    items = [
        {"criterion": "  Work.txt   EXISTS. ", "status": "passed", "notes": "x"},
        {"id": 2, "criterion": "the tests", "status": "passed"},
    ]
    report = parse_verification(
        [tagged(verification(acceptanceCriteria=items, prUrl="x"))], CRITERIA, BASE
    )
    assert report.valid
    assert [c.criterion for c in report.acceptance_criteria] == CRITERIA


@pytest.mark.parametrize(
    ("texts", "problem"),
    [
        (["It all looks fine to me."], "no <verification-report> block"),
        ([tagged("{not json")], "not valid JSON"),
        ([tagged("[1, 2]")], "must be a JSON object"),
        (
            [tagged(verification(acceptanceCriteria=verification()["acceptanceCriteria"][:1]))],
            "acceptance criterion 2 ('tests pass') is not in the report",
        ),
        (
            [tagged({k: v for k, v in verification().items() if k != "recommendation"})],
            "no recommendation",
        ),
        ([tagged(verification(recommendation="ship it"))], "recommendation"),
        (
            [tagged(verification(acceptanceCriteria=[{"criterion": "x", "status": "maybe"}]))],
            "status",
        ),
        ([tagged("x" * (300 * 1024))], "larger than"),
    ],
)
def test_an_unusable_report_is_invalid_never_an_approval(texts: list[str], problem: str) -> None:
    report = parse_verification(texts, CRITERIA, BASE)
    assert not report.valid and problem in (report.problem or "")
    assert not verification_passed(report)
    assert report.raw  # what the agent said, for a person to read


def test_an_approval_over_a_failed_criterion_does_not_pass() -> None:
    items = verification()["acceptanceCriteria"]
    items[1] = {**items[1], "status": "blocked"}
    report = parse_verification([tagged(verification(acceptanceCriteria=items))], CRITERIA, BASE)
    assert report.valid and not verification_passed(report)


def test_the_last_report_wins_and_context_cannot_be_forged() -> None:
    rejected = verification(recommendation="request_changes")
    forged = verification(taskId="999-other", cycle=7, valid=True)
    report = parse_verification([tagged(rejected), tagged(forged)], CRITERIA, BASE)
    assert report.recommendation == "approve"
    assert (report.task_id, report.cycle) == ("001-make-it-work", 1)


def test_a_fenced_json_block_is_taken_when_there_is_no_tag() -> None:
    text = "My report:\n```json\n" + json.dumps(verification()) + "\n```"
    assert parse_verification([text], CRITERIA, BASE).valid


def test_a_report_printed_over_many_lines_is_one() -> None:
    """A plain-text agent's words come a line at a time: a tagged or fenced report over
    many lines is read as one."""
    pretty = json.dumps(verification(), indent=2).splitlines()
    for lines in (
        ["<verification-report>", *pretty, "</verification-report>"],
        ["Report:", "```json", *pretty, "```"],
    ):
        printed = AgentOutcome(exit_code=0, reason="exited")
        printed.add_texts(lines)
        assert parse_verification(agent_words(printed), CRITERIA, BASE).valid


def test_review_blocking_comments_mean_changes() -> None:
    def review(assessment: str, *comments: dict[str, Any]) -> Any:
        body = {"assessment": assessment, "comments": list(comments)}
        return parse_review([tagged(body, "review-report")], BASE)

    blocking = {
        "issue": "unsafe",
        "file": "a.py",
        "line": 3,
        "severity": "critical",
        "blocking": True,
    }
    seed_style = {"issue": "plain text password", "severity": "blocking"}
    suggestion = {"issue": "rename", "severity": "minor"}
    assert review_passed(review("approve"))
    assert review_passed(review("comment", suggestion))
    assert not review_passed(review("approve", blocking))
    assert not review_passed(review("approve", seed_style))  # seed 4.5's severity
    assert not review_passed(review("request_changes", suggestion))
    invalid = parse_review(["<review-report>{}</review-report>"], BASE)
    assert not invalid.valid and "no assessment" in (invalid.problem or "")


def test_findings_carry_failed_criteria_tests_and_items() -> None:
    items = verification()["acceptanceCriteria"]
    items[0] = {**items[0], "status": "failed", "evidence": "no such file"}
    report = parse_verification(
        [
            tagged(
                verification(
                    acceptanceCriteria=items,
                    recommendation="request_changes",
                    testResults={"failures": [{"name": "test_a", "error": "boom"}]},
                    feedback={"items": [{"description": "add it", "file": "w", "line": 2}]},
                )
            )
        ],
        CRITERIA,
        BASE,
    )
    findings = findings_of(report, "verification")
    texts = [f.description for f in findings.items]
    assert texts[0].startswith("acceptance criterion 1 (work.txt exists) failed: no such file")
    assert "test test_a fails: boom" in texts and "add it" in texts


def test_findings_and_guidance_go_into_the_implementation_prompt() -> None:
    task = Task(id="001-x", title="X", description="do x", acceptance_criteria=CRITERIA)
    prd = PRD(name="p", description="d", tasks=[task])
    report = parse_review(
        [
            tagged(
                {
                    "assessment": "request_changes",
                    "comments": [
                        {
                            "issue": "SQL built by hand",
                            "file": "db.py",
                            "line": 9,
                            "blocking": True,
                            "suggestion": "use parameters",
                        }
                    ],
                },
                "review-report",
            )
        ],
        BASE,
    )
    prompt = build_task_prompt(
        prd,
        task,
        2,
        10,
        [],
        None,
        [],
        ["test"],
        findings=findings_of(report, "review"),
        guidance="Keep the public API.",
    )
    assert "Changes the code reviewer asked for (review cycle 1)" in prompt
    assert "[blocking] (db.py:9) SQL built by hand — suggestion: use parameters" in prompt
    assert "Keep the public API." in prompt


def test_phases_config_and_order() -> None:
    assert Config().phases == ["implementation", "verification"]
    assert next_phase(["implementation", "verification"], "implementation") == "verification"
    assert next_phase(["implementation", "verification"], "verification") == "done"
    assert next_phase(["implementation", "review"], "implementation") == "review"
    assert next_phase(["implementation"], "implementation") == "done"
    for bad in (["review"], ["implementation", "review", "verification"], []):
        with pytest.raises(ValidationError):
            Config(phases=bad)
    assert (
        Config(roles={"reviewer": {"backend": "codex"}}).role_agent("reviewer").backend == "codex"
    )
    assert Config().role_agent("verifier") == Config().agent


def test_the_seed_status_table_with_blocked_and_escalated() -> None:
    check_battle_transition(B.RUNNING, B.BLOCKED)
    check_battle_transition(B.BLOCKED, B.RUNNING)
    check_battle_transition(B.RUNNING, B.ESCALATED)
    for new in (B.RUNNING, B.FAILED, B.CANCELLED):
        check_battle_transition(B.ESCALATED, new)
        check_battle_transition(B.BLOCKED, new)
    # nothing else: an escalated battle is not paused or completed without running
    for old in (B.BLOCKED, B.ESCALATED):
        assert BATTLE_TRANSITIONS[old] == {B.RUNNING, B.FAILED, B.CANCELLED}
    with pytest.raises(IllegalTransition):
        check_battle_transition(B.ESCALATED, B.COMPLETED)
    with pytest.raises(IllegalTransition):
        check_battle_transition(B.PAUSED, B.BLOCKED)
    assert battle_path(B.BLOCKED, B.PAUSED) == [B.RUNNING, B.PAUSED]
    assert battle_path(B.ESCALATED, B.COMPLETED) == [B.RUNNING, B.COMPLETED]
    check_task_transition(T.IN_PROGRESS, T.ESCALATED)
    check_task_transition(T.ESCALATED, T.IN_PROGRESS)
    with pytest.raises(IllegalTransition):
        check_task_transition(T.BLOCKED, T.COMPLETED)
    assert task_path_for_battle(T.IN_PROGRESS, B.BLOCKED) == [T.BLOCKED]
    assert task_path_for_battle(T.ESCALATED, B.COMPLETED) == [T.IN_PROGRESS, T.COMPLETED]
    assert task_path_for_battle(T.ESCALATED, B.CANCELLED) == [T.PAUSED]


def result(text: str, is_error: bool = True) -> AgentResult:
    return AgentResult(text, is_error, "success", 0, None, 1, 1, "s")


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (AgentOutcome(exit_code=23, reason="exited", error="exited with status 23"), "exit_code"),
        (AgentOutcome(exit_code=124, reason="exited", error="x"), "exit_code"),
        (
            AgentOutcome(1, "exited", result=result("API Error: Connection error."), error="e"),
            "connection",
        ),
        (AgentOutcome(1, "exited", error="turn failed: stream disconnected"), "connection"),
        (AgentOutcome(1, "exited", error="the agent exited with status 1: boom"), None),
        (AgentOutcome(0, "exited", texts=["fixing the ECONNRESET handling"]), None),
        (AgentOutcome(None, "timeout", error="ran past the timeout"), None),
        # the agent's own crash: "FileNotFoundError" holds "enotfound", "my_econnreset_
        # handler" an error code, "reconnection error" a phrase: words only, not pieces
        (
            AgentOutcome(1, "exited", error="status 1: FileNotFoundError: [Errno 2] No such"),
            None,
        ),
        (AgentOutcome(1, "exited", error="NameError: name 'my_econnreset_x' is not"), None),
        (AgentOutcome(1, "exited", error="AssertionError: no reconnection errors"), None),
        (AgentOutcome(1, "exited", error="getaddrinfo ENOTFOUND api.anthropic.com"), "connection"),
        (
            AgentOutcome(1, "exited", error="Error: connect ECONNREFUSED 127.0.0.1:443"),
            "connection",
        ),
        # a run that failed after its turn: its result is its own last words, not an error
        (
            AgentOutcome(
                1,
                "exited",
                result=result("Handled the ECONNRESET case in client.py.", is_error=False),
                error="the agent exited with status 1",
            ),
            None,
        ),
    ],
)
def test_transient_failures(outcome: AgentOutcome, kind: str | None) -> None:
    failure = transient_failure(outcome)
    assert (failure.kind if failure else None) == kind


def test_backoff_doubles_to_a_cap() -> None:
    assert [backoff_delay(n) for n in range(1, 8)] == [60, 120, 240, 480, 960, 1800, 1800]
    assert backoff_delay(50) == backoff_delay(10_000) == 30 * 60 and backoff_delay(0) == 60
