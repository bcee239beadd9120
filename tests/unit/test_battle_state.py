"""A battle's owner and what is asked of it.

- The stop reasons: a cancel is never downgraded, an immediate pause is forgotten once it
  took effect, and nothing but a pause-now is (expected values written out, not computed
  from the precedence table under test).
- The mailbox: commands come out in the order they were posted, a full mailbox refuses
  more, ``arrived`` says when something waits.
- The owner's commands: what each status accepts, checked when asked, nothing changed on
  the battle's record by asking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import anyio
import pytest

from pokeralph_core.timeutil import utcnow
from pokeralphd.battle.commands import (
    MAX_PENDING,
    Answered,
    Approve,
    Mailbox,
    Pause,
    Resume,
    Stop,
)
from pokeralphd.battle.run import BattleRun
from pokeralphd.battle.state import ActiveBattle, StopReason
from pokeralphd.domain.models import Battle, Escalation, Progress
from pokeralphd.domain.statuses import BattleStatus
from pokeralphd.errors import InvalidState

if TYPE_CHECKING:
    from pokeralphd.battle.state import BattleControl

pytestmark = pytest.mark.anyio
B = BattleStatus


def _active(status: BattleStatus = B.RUNNING) -> ActiveBattle:
    battle = Battle(task_id="001-a", status=status, started_at=utcnow())
    return ActiveBattle(battle, Progress(task_id="001-a"), "A")


def _run(status: BattleStatus) -> BattleRun:
    return BattleRun(cast("BattleControl", None), _active(status))


# (first, second) -> the reason that stands, and whether the second was taken
STOPS: list[tuple[StopReason, StopReason, StopReason, bool]] = [
    ("pause_now", "pause_now", "pause_now", True),
    ("pause_now", "shutdown", "shutdown", True),
    ("pause_now", "cancel", "cancel", True),
    ("shutdown", "pause_now", "shutdown", False),
    ("shutdown", "shutdown", "shutdown", True),
    ("shutdown", "cancel", "cancel", True),
    ("cancel", "pause_now", "cancel", False),
    ("cancel", "shutdown", "cancel", False),
    ("cancel", "cancel", "cancel", True),
]


@pytest.mark.parametrize(("first", "second", "stands", "taken"), STOPS)
async def test_the_stronger_reason_wins_in_any_order(
    first: StopReason, second: StopReason, stands: StopReason, taken: bool
) -> None:
    active = _active()
    assert active.request_stop(first)
    assert active.request_stop(second) is taken
    assert active.stop_reason == stands


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


async def test_the_mailbox_keeps_order_and_says_when_something_waits() -> None:
    box = Mailbox()
    assert not box.arrived.is_set()
    box.post(Pause())
    box.post(Resume())
    assert box.arrived.is_set()
    assert box.take() == [Pause(), Resume()]
    assert not box.arrived.is_set() and len(box) == 0
    got: list[Any] = []

    async def receiver() -> None:
        got.append(await box.receive())
        got.append(await box.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await anyio.wait_all_tasks_blocked()
        box.post(Approve(True, "ok"))
        box.post(Answered())
    assert got == [Approve(True, "ok"), Answered()]


async def test_a_full_mailbox_refuses_more_and_keeps_what_it_has() -> None:
    box = Mailbox()
    for _ in range(MAX_PENDING):
        box.post(Resume())
    with pytest.raises(InvalidState) as caught:
        box.post(Pause(now=True))
    assert caught.value.data["limit"] == MAX_PENDING
    assert len(box) == MAX_PENDING and all(c == Resume() for c in box.take())


async def test_commands_are_checked_against_the_status_when_asked() -> None:
    paused = _run(B.PAUSED)
    assert paused.pause(now=False) is False  # already paused: nothing posted
    assert len(paused.mailbox) == 0
    paused.resume()
    assert paused.mailbox.take() == [Resume()]
    with pytest.raises(InvalidState, match="not awaiting approval"):
        paused.approve(True, None)

    running = _run(B.RUNNING)
    with pytest.raises(InvalidState, match="not paused"):
        running.resume()
    assert running.pause(now=False) is True
    assert running.mailbox.take() == [Pause(False)]
    assert running.state.battle.status == B.RUNNING  # asking changes nothing

    awaiting = _run(B.AWAITING_APPROVAL)
    awaiting.approve(False, "no")
    assert awaiting.mailbox.take() == [Approve(False, "no")]


async def test_a_pause_now_interrupts_the_agent_run_and_is_still_a_message() -> None:
    run = _run(B.RUNNING)
    scope = anyio.CancelScope()
    run.state.iteration_scope = scope
    assert run.pause(now=True)
    assert scope.cancel_called and run.state.stop_reason == "pause_now"
    assert run.mailbox.take() == [Pause(True)]


async def test_a_cancel_outranks_what_was_asked_before_it() -> None:
    run = _run(B.RUNNING)
    run.pause(now=False)
    run.stop(Stop("cancel"))
    assert run.scope.cancel_called and run.state.stop_reason == "cancel"
    assert len(run.mailbox) == 0  # the pause no longer matters
    with pytest.raises(InvalidState, match="being cancelled"):
        run.pause(now=True)


async def test_an_escalated_battle_takes_one_answer_and_no_pause_or_resume() -> None:
    run = _run(B.ESCALATED)
    run.state.battle.escalations.append(
        Escalation(
            number=1, at=utcnow(), phase="implementation", reason="merge_conflict", message="m"
        )
    )
    with pytest.raises(InvalidState, match="escalated"):
        run.pause(now=False)
    with pytest.raises(InvalidState, match="escalated"):
        run.resume()
    with pytest.raises(InvalidState, match="not the open one"):
        run.record_answer(2, "retry", None, None)
    escalation = run.record_answer(1, "retry", "  try X  ", None)
    assert escalation.resolution is not None and escalation.resolution.guidance == "try X"
    assert not escalation.resolution.applied
    with pytest.raises(InvalidState, match="already answered"):
        run.record_answer(1, "accept", None, None)
