"""Domain model: ids, statuses and transitions, validation tables of the data-model seed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pokeralph_core.config.model import Config
from pokeralphd.domain.ids import InvalidId, next_task_id, slugify, validate_task_id
from pokeralphd.domain.models import PRD, Battle, Iteration, Progress, Task
from pokeralphd.domain.statuses import (
    BATTLE_TO_PROGRESS_STATUS,
    BATTLE_TO_TASK_STATUS,
    BATTLE_TRANSITIONS,
    TASK_TRANSITIONS,
    BattleStatus,
    IllegalTransition,
    ProgressStatus,
    TaskStatus,
    check_battle_transition,
    check_progress_transition,
    check_task_transition,
    task_path_for_battle,
)

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def test_config_defaults_match_the_seed() -> None:
    c = Config()
    assert (c.max_iterations_per_task, c.mode, c.feedback_loops) == (
        10,
        "hitl",
        ["test", "lint", "typecheck"],
    )
    assert (c.timeout_minutes, c.polling_interval_ms, c.auto_commit) == (30, 2000, True)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxIterationsPerTask", 0),
        ("maxIterationsPerTask", 101),
        ("mode", "fast"),
        ("feedbackLoops", []),
        ("feedbackLoops", ["test", "test"]),
        ("timeoutMinutes", 0),
        ("timeoutMinutes", 61),
        ("pollingIntervalMs", 499),
        ("pollingIntervalMs", 10001),
        ("autoCommit", "yes"),
        ("feedbackLoops", ["../x"]),
    ],
)
def test_config_rejects_out_of_range(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        Config.model_validate({field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_config_accepts_the_bounds() -> None:
    Config.model_validate(
        {"maxIterationsPerTask": 100, "timeoutMinutes": 60, "pollingIntervalMs": 500}
    )


def test_unknown_config_key_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        Config.model_validate({"maxIteration": 3})
    assert info.value.errors()[0]["loc"] == ("maxIteration",)


def test_task_ids_follow_the_pattern() -> None:
    assert next_task_id("Monorepo setup", []) == "001-monorepo-setup"
    assert next_task_id("Add API!", ["001-a", "007-b"]) == "008-add-api"
    assert next_task_id("Élan vital", []) == "001-elan-vital"
    assert next_task_id("!!!", []) == "001-task"
    slug = slugify("a very long title that goes on and on and on forever")
    assert len(slug) <= 30 and not slug.endswith("-")


@given(st.text(max_size=300))
def test_generated_ids_always_validate(title: str) -> None:
    task_id = next_task_id(title, ["001-x"])
    assert validate_task_id(task_id) == task_id
    assert len(task_id.split("-", 1)[1]) <= 30


@pytest.mark.parametrize(
    "bad", ["../x", "001", "01-x", "001-A", "001-x/y", "001-x\n", "", "abc-def", None, 7]
)
def test_bad_ids_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidId):
        validate_task_id(bad)


@given(st.text(max_size=50))
def test_validate_task_id_matches_regex(value: str) -> None:
    # ASCII digits only; past 999 the number grows without a leading zero (domain/ids.py)
    ok = bool(re.fullmatch(r"(?:[0-9]{3}|[1-9][0-9]{3,})-[a-z0-9-]+", value)) and len(value) <= 64
    try:
        validate_task_id(value)
    except InvalidId:
        assert not ok
    else:
        assert ok


def test_task_transitions_follow_the_seed_diagram() -> None:
    check_task_transition(TaskStatus.PENDING, TaskStatus.IN_PROGRESS)
    check_task_transition(TaskStatus.FAILED, TaskStatus.PENDING)
    with pytest.raises(IllegalTransition):
        check_task_transition(TaskStatus.PENDING, TaskStatus.COMPLETED)
    with pytest.raises(IllegalTransition):
        check_task_transition(TaskStatus.COMPLETED, TaskStatus.PENDING)


@given(st.sampled_from(list(BattleStatus)), st.sampled_from(list(BattleStatus)))
def test_battle_transitions_are_exactly_the_table(old: BattleStatus, new: BattleStatus) -> None:
    allowed = old == new or new in BATTLE_TRANSITIONS[old]
    try:
        check_battle_transition(old, new)
    except IllegalTransition:
        assert not allowed
    else:
        assert allowed


def test_terminal_battles_go_nowhere() -> None:
    for status in (BattleStatus.COMPLETED, BattleStatus.FAILED, BattleStatus.CANCELLED):
        assert not BATTLE_TRANSITIONS[status]


def test_mapping_matches_the_seed_proposal() -> None:
    assert BATTLE_TO_TASK_STATUS[BattleStatus.AWAITING_APPROVAL] == TaskStatus.IN_PROGRESS
    assert BATTLE_TO_TASK_STATUS[BattleStatus.CANCELLED] == TaskStatus.PAUSED


@given(st.sampled_from(list(TaskStatus)), st.sampled_from(list(BattleStatus)))
def test_task_paths_only_use_legal_edges(task: TaskStatus, battle: BattleStatus) -> None:
    try:
        path = task_path_for_battle(task, battle)
    except IllegalTransition:
        return
    current = task
    for step in path:
        assert step in TASK_TRANSITIONS[current]
        current = step
    assert current == BATTLE_TO_TASK_STATUS[battle]


def _task(**kw: object) -> dict[str, object]:
    data: dict[str, object] = {
        "id": "001-a",
        "title": "A",
        "description": "d",
        "acceptanceCriteria": ["c"],
    }
    data.update(kw)
    return data


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"title": ""}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"description": ""}, "description"),
        ({"priority": 0}, "priority"),
        ({"acceptanceCriteria": []}, "acceptanceCriteria"),
        ({"status": "done"}, "status"),
        ({"id": "1-a"}, "id"),
        ({"createdAt": "yesterday"}, "createdAt"),
        ({"createdAt": "2026-01-01T00:00:00"}, "createdAt"),
    ],
)
def test_task_validation(change: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Task.model_validate(_task(**change))
    assert info.value.errors()[0]["loc"][0] == field


def test_prd_rules() -> None:
    with pytest.raises(ValidationError):
        PRD.model_validate({"name": "", "description": "d"})
    with pytest.raises(ValidationError):
        PRD.model_validate({"name": "n", "description": "d", "metadata": {"version": "1.0"}})
    with pytest.raises(ValidationError):
        PRD.model_validate({"name": "n", "description": "d", "tasks": [_task(), _task()]})
    prd = PRD.model_validate(
        {"name": "n", "description": "d", "tasks": [_task()], "metadata": {"version": "1.0.0"}}
    )
    again = PRD.model_validate(prd.dump())
    assert again == prd


def test_iteration_and_battle_invariants() -> None:
    with pytest.raises(ValidationError):
        Iteration(number=1, started_at=NOW, result="failure")
    with pytest.raises(ValidationError):
        Iteration(number=0, started_at=NOW, result="success")
    with pytest.raises(ValidationError):
        Iteration(number=1, started_at=NOW, result="success", files_changed=["/etc/passwd"])
    with pytest.raises(ValidationError):
        Battle(task_id="001-a", status=BattleStatus.FAILED, started_at=NOW)
    with pytest.raises(ValidationError):
        Progress(task_id="001-a", current_iteration=-1)
    assert Progress(task_id="001-a").dump()["error"] is None


def test_every_battle_move_is_a_legal_progress_move() -> None:
    """progress.json follows the battle (``BATTLE_TO_PROGRESS_STATUS``) and its moves are
    checked: no legal battle move may need an illegal progress move."""
    for old, targets in BATTLE_TRANSITIONS.items():
        for new in targets:
            before, after = BATTLE_TO_PROGRESS_STATUS[old], BATTLE_TO_PROGRESS_STATUS[new]
            assert check_progress_transition(before, after) == after, (old, new)


def test_progress_moves_are_checked() -> None:
    check_progress_transition(ProgressStatus.IDLE, ProgressStatus.IN_PROGRESS)
    with pytest.raises(IllegalTransition):
        check_progress_transition(ProgressStatus.COMPLETED, ProgressStatus.IN_PROGRESS)
    with pytest.raises(IllegalTransition):
        check_progress_transition(ProgressStatus.IDLE, ProgressStatus.COMPLETED)
