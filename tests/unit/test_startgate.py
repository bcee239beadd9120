"""startgate: how many runs may be starting up at once, and when a run has started (its
first word, its end, a settle time), through :func:`pokeralphd.proc.spawn`."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import Process

from pokeralphd import childproc
from pokeralphd.cli import parse_args
from pokeralphd.proc import ProcessOwner, kill_group, spawn
from pokeralphd.settings import DaemonSettings
from pokeralphd.startgate import StartGate, default_slots

pytestmark = pytest.mark.anyio

SLEEP = shutil.which("sleep") or "/bin/sleep"
# waits for a line on stdin, then prints it back and stays (until killed)
ECHO_THEN_STAY = "read line; echo $line; exec sleep 60"
pidfds = pytest.mark.skipif(not childproc.AVAILABLE, reason="first words are heard on Linux")


def gated(slots: int, settle: float = 30.0) -> ProcessOwner:
    return dataclasses.replace(ProcessOwner.anonymous(), start_gate=StartGate(slots, settle))


async def stop(process: Process) -> None:
    kill_group(process.pid)
    await process.wait()
    await process.aclose()


async def test_slots_are_taken_in_turn_and_given_back_once() -> None:
    gate = StartGate(1)
    first = await gate.enter()
    order: list[str] = []

    async def second() -> None:
        (await gate.enter()).done()
        order.append("second")

    async def third() -> None:
        (await gate.enter()).done()
        order.append("third")

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await wait_all_tasks_blocked()
        tg.start_soon(third)
        await wait_all_tasks_blocked()
        assert (gate.starting, gate.waiting, order) == (1, 2, [])
        first.done()
        first.done()  # a second call gives nothing back twice
    assert order == ["second", "third"]
    assert (gate.starting, gate.waiting) == (0, 0)


async def test_a_cancelled_wait_takes_no_slot() -> None:
    gate = StartGate(1)
    first = await gate.enter()
    with anyio.move_on_after(0.05):
        await gate.enter()
    assert (gate.starting, gate.waiting) == (1, 0)
    first.done()
    assert gate.starting == 0
    (await gate.enter()).done()


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        StartGate(0)


@pidfds
async def test_the_next_run_starts_once_the_first_has_printed(tmp_path: Path) -> None:
    owner = gated(1)
    assert owner.start_gate is not None
    first = await spawn(
        ["/bin/sh", "-c", ECHO_THEN_STAY],
        cwd=str(tmp_path),
        env={},
        owner=owner,
        stdin=subprocess.PIPE,
    )
    started: list[Process] = []

    async def next_run() -> None:
        started.append(await spawn([SLEEP, "60"], cwd=str(tmp_path), env={}, owner=owner))

    try:
        assert first.stdout is not None and first.stdin is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(next_run)
            await wait_all_tasks_blocked()
            assert (started, owner.start_gate.waiting) == ([], 1)  # the first has not spoken
            await first.stdin.send(b"ready\n")
            assert await first.stdout.receive() == b"ready\n"
        assert len(started) == 1  # it started once the first was heard
        assert owner.start_gate.starting == 1  # the second's slot: sleep prints nothing
    finally:
        await stop(first)
        for process in started:
            await stop(process)
    assert owner.start_gate.starting == 0  # an end gives the slot back


@pidfds
async def test_a_run_that_ends_without_a_word_frees_its_slot(tmp_path: Path) -> None:
    owner = gated(1)
    assert owner.start_gate is not None
    quiet = await spawn(["/bin/sh", "-c", "exit 3"], cwd=str(tmp_path), env={}, owner=owner)
    assert owner.start_gate.starting == 1
    assert await quiet.wait() == 3
    await quiet.aclose()
    assert owner.start_gate.starting == 0


@pidfds
async def test_a_quiet_run_holds_its_slot_for_the_settle_time_only(tmp_path: Path) -> None:
    owner = gated(1, settle=0.2)
    quiet = await spawn([SLEEP, "60"], cwd=str(tmp_path), env={}, owner=owner)
    try:
        with anyio.fail_after(10):  # the settle time, not the 60 s of its run
            second = await spawn([SLEEP, "60"], cwd=str(tmp_path), env={}, owner=owner)
        await stop(second)
    finally:
        await stop(quiet)


async def test_a_start_that_fails_gives_its_slot_back(tmp_path: Path) -> None:
    owner = gated(1)
    assert owner.start_gate is not None
    with pytest.raises(FileNotFoundError):  # exec's error: its folder is not there
        await spawn([SLEEP, "60"], cwd=str(tmp_path / "gone"), env={}, owner=owner)
    assert owner.start_gate.starting == 0
    with pytest.raises(FileNotFoundError):  # refused before it took a slot
        await spawn(["no-such-program-here"], cwd=str(tmp_path), env={}, owner=owner)
    assert owner.start_gate.starting == 0


async def test_where_nothing_hears_a_run_load_its_slot_is_given_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio's way (no pidfds, another OS): starts are not held back past their start."""
    monkeypatch.setattr(childproc, "usable", lambda: False)
    owner = gated(1)
    assert owner.start_gate is not None
    first = await spawn([SLEEP, "60"], cwd=str(tmp_path), env={}, owner=owner)
    try:
        assert owner.start_gate.starting == 0
        with anyio.fail_after(10):
            second = await spawn([SLEEP, "60"], cwd=str(tmp_path), env={}, owner=owner)
        await stop(second)
    finally:
        await stop(first)


def test_the_daemon_bounds_starting_runs_by_its_setting() -> None:
    assert default_slots() == max(2, 2 * (os.cpu_count() or 1))
    assert DaemonSettings().starting_runs == default_slots()
    assert DaemonSettings.model_validate({"startingRuns": 1}).starting_runs == 1
    for wrong in (0, 257):
        with pytest.raises(ValueError, match="startingRuns"):
            DaemonSettings.model_validate({"startingRuns": wrong})
    owner = ProcessOwner.for_state_dir("/state", 19, 3)
    assert owner.start_gate is not None and owner.start_gate.slots == 3
    assert ProcessOwner.for_state_dir("/state").start_gate is None
    args = parse_args(["--starting-runs", "5"])
    assert args.starting_runs == 5


def test_the_flag_says_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"(default {default_slots()})" in out
    assert "PydanticUndefined" not in out


async def test_a_held_slot_comes_back_at_the_blocks_end_or_after_the_settle_time() -> None:
    """:meth:`StartGate.held`, for a burst of work done in the daemon (a battle landing):
    the slot is the block's until it ends, or until the settle time if it lasts longer
    (the work goes on; the next one may start)."""
    gate = StartGate(1, settle=0.2)
    async with gate.held():
        assert gate.starting == 1
    assert gate.starting == 0
    finished = anyio.Event()
    order: list[str] = []

    async def long_block() -> None:
        async with gate.held():
            await finished.wait()
            order.append("long block done")

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_block)
        await wait_all_tasks_blocked()
        with anyio.fail_after(10):  # the settle time, not the block's end
            slot = await gate.enter()
        order.append("next one in")
        slot.done()
        finished.set()
    assert order == ["next one in", "long block done"]
    assert gate.starting == 0
