"""The battle's stop reasons: a cancel is never downgraded, an immediate pause is
forgotten once it took effect, and nothing but a pause-now is."""

from __future__ import annotations

import pytest

from pokeralphd.battle.state import STOP_PRECEDENCE, ActiveBattle, StopReason
from pokeralphd.domain.models import Battle, Progress
from pokeralphd.domain.statuses import BattleStatus
from pokeralphd.domain.timeutil import utcnow

pytestmark = pytest.mark.anyio


def _active() -> ActiveBattle:
    battle = Battle(task_id="001-a", status=BattleStatus.RUNNING, started_at=utcnow())
    return ActiveBattle(battle, Progress(task_id="001-a"), "A")


REASONS: list[StopReason] = ["pause_now", "shutdown", "cancel"]


@pytest.mark.parametrize("first", REASONS)
@pytest.mark.parametrize("second", REASONS)
async def test_the_stronger_reason_wins_in_any_order(first: StopReason, second: StopReason) -> None:
    active = _active()
    assert active.request_stop(first)
    taken = active.request_stop(second)
    stronger = max(first, second, key=STOP_PRECEDENCE.__getitem__)
    assert active.stop_reason == stronger
    assert taken == (STOP_PRECEDENCE[second] >= STOP_PRECEDENCE[first])


async def test_only_a_pause_now_is_forgotten() -> None:
    active = _active()
    active.request_stop("pause_now")
    active.clear_pause_now()
    assert active.stop_reason is None and not active.stopping
    stronger: list[StopReason] = ["shutdown", "cancel"]
    for reason in stronger:
        active = _active()
        active.request_stop(reason)
        active.clear_pause_now()
        assert active.stop_reason == reason and active.stopping
