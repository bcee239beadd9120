"""The order the suite's tests start in under xdist (tests/conftest.py): the longest
first, and the tests that mostly wait spread among the integration tests, none lost."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import TYPE_CHECKING, cast

from tests.conftest import WAITING, start_order

if TYPE_CHECKING:
    import pytest


@dataclass
class Item:
    nodeid: str


def test_waiting_tests_are_spread_among_the_integration_tests_and_none_is_lost() -> None:
    slow = [Item("tests/real/test_real_acp.py::test_a[opencode]")]
    cli = [Item(f"tests/cli/test_c.py::test_{n}") for n in range(10)]
    battles = [Item(f"tests/integration/test_b.py::test_{n}") for n in range(40)]
    waiting = [Item(f"tests/notify/test_notify_live.py::test_{n}") for n in range(4)]
    units = [Item(f"tests/unit/test_u.py::test_{n}") for n in range(20)]
    slow_reader = Item("tests/unit/test_wire_limits.py::test_a_slow_reader_gets_the_whole_frame")
    items = cast("list[pytest.Item]", [*cli, *battles, *waiting, *units, slow_reader, *slow])
    order = [item.nodeid for item in start_order(items)]
    assert sorted(order) == sorted(item.nodeid for item in items)  # the same tests
    assert order[0] == slow[0].nodeid  # SLOW_FIRST stays first
    placed = [n for n, nodeid in enumerate(order) if any(fnmatch(nodeid, p) for p in WAITING)]
    assert len(placed) == 5
    after, before = order.index(cli[-1].nodeid), order.index(units[0].nodeid)
    assert all(after < n < before for n in placed)  # among the battles, none at the end
    gaps = [b - a for a, b in itertools.pairwise(placed)]
    assert min(gaps) >= 40 // 5  # not in one block: a step of battles between them


def test_without_integration_tests_the_order_is_kept_but_for_the_waiting_last() -> None:
    items = cast(
        "list[pytest.Item]",
        [Item("tests/notify/test_notify_live.py::test_x"), Item("tests/unit/test_u.py::test_y")],
    )
    assert [i.nodeid for i in start_order(items)] == [
        "tests/unit/test_u.py::test_y",
        "tests/notify/test_notify_live.py::test_x",
    ]
