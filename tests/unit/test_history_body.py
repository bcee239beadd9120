"""A battle's history body from kept iteration dumps (:mod:`pokeralphd.store.history_body`):
the same as a full dump, key for key and in order; a record dumped once is not dumped
again; a field assigned is noticed; a change in place is caught where checking is on."""

from __future__ import annotations

from typing import Any

import pytest

from pokeralph_core.timeutil import utcnow
from pokeralphd.domain.models import Battle, FeedbackResult, Iteration
from pokeralphd.domain.statuses import BattleStatus
from pokeralphd.store.history_body import HistoryBodies, StaleHistoryBody


def _battle(iterations: int) -> Battle:
    battle = Battle(task_id="001-a", status=BattleStatus.RUNNING, started_at=utcnow())
    for n in range(1, iterations + 1):
        _add(battle, n)
    return battle


def _add(battle: Battle, number: int) -> Iteration:
    record = Iteration(
        number=number,
        started_at=utcnow(),
        ended_at=utcnow(),
        result="success",
        files_changed=[f"f{number}.txt"],
        feedback_results={"test": FeedbackResult(passed=True, output="ok")},
        timings_ms={"git": 1.5},
    )
    battle.iterations = [*battle.iterations, record]
    return record


def _full(battle: Battle) -> dict[str, Any]:
    return battle.model_dump(mode="json", by_alias=True)


def test_the_body_is_the_full_dump_in_order_and_old_records_are_not_dumped_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bodies = HistoryBodies(check=False)
    battle = _battle(3)
    body = bodies.body(battle)
    assert body == _full(battle) and list(body) == list(_full(battle))
    dumped: list[int] = []
    real = Iteration.model_dump

    def counting(self: Iteration, **kwargs: Any) -> dict[str, Any]:
        dumped.append(self.number)
        return real(self, **kwargs)

    monkeypatch.setattr(Iteration, "model_dump", counting)
    _add(battle, 4)
    battle.cost_usd = 1.25
    assert bodies.body(battle) == _full(battle)
    assert dumped == [4]  # only the new record


def test_a_field_assigned_after_a_save_is_noticed() -> None:
    bodies = HistoryBodies(check=False)
    battle = _battle(2)
    bodies.body(battle)
    battle.iterations[0].error = "found later"
    battle.iterations[1].files_changed = ["other.txt"]
    assert bodies.body(battle) == _full(battle)


def test_a_change_in_place_is_caught_where_checking_is_on() -> None:
    bodies = HistoryBodies(check=True)
    battle = _battle(2)
    bodies.body(battle)
    battle.iterations[0].files_changed.append("sneaky.txt")  # in place: not noticed
    with pytest.raises(StaleHistoryBody, match="changed in place"):
        bodies.body(battle)
    assert HistoryBodies(check=False).body(battle) == _full(battle)  # a fresh one is right
