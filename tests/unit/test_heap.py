"""The daemon process's garbage collector (:mod:`pokeralphd.heap`): set in the daemon's
own process, never in a process that runs a daemon among other things (a test)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from pokeralphd import heap
from tests.inproc import running_daemon

SETTLED = """
import gc
from pokeralphd import heap
before = gc.get_freeze_count()
heap.settle()
print(before, gc.get_freeze_count(), gc.get_threshold()[0])
"""


def test_settle_freezes_what_is_there_and_widens_the_young_generation() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SETTLED], capture_output=True, text=True, check=True
    ).stdout.split()
    before, frozen, young = map(int, out)
    assert before == 0 and frozen > 1000  # the modules and objects of the start
    assert young == heap.YOUNG_THRESHOLD


@pytest.mark.anyio
async def test_a_daemon_in_another_program_leaves_its_collector_alone(home: Path) -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    async with running_daemon(home) as d:
        await d.call("daemon.ping")
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() <= frozen  # nothing more frozen (some frozen ones freed)
