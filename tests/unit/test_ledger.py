"""The cost ledger: durable appends, totals by every grouping, a line cut short by a
crash, and the frozen v1 file."""

from __future__ import annotations

import os
import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pokeralphd.errors import CorruptFile
from pokeralphd.store.ledger import Ledger, LedgerEntry, Totals

FROZEN = Path(__file__).resolve().parents[1] / "fixtures" / "v1" / "ledger"


def entry(
    day: int, cost: float, repo: str = "r", task: str = "001-x", backend: str = "claude"
) -> LedgerEntry:
    return LedgerEntry(
        at=datetime(2026, 11, day, 12, tzinfo=UTC),
        repo=repo,
        task_id=task,
        attempt=1,
        iteration=1,
        backend=backend,
        model=None,
        cost_usd=cost,
        tokens={"inputTokens": 10, "outputTokens": 5},
    )


def test_the_frozen_v1_ledger_loads_and_its_cut_line_is_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    shutil.copytree(FROZEN, folder)
    ledger = Ledger(folder)
    ledger.load()
    assert ledger.skipped == 1  # the last line, cut short by a crash
    by_day, total = ledger.summary("day")
    assert {k: round(v.cost_usd, 4) for k, v in by_day.items()} == {
        "2026-11-22": 0.08,
        "2026-11-23": 0.0,
    }
    assert total.iterations == 3 and total.tokens["cacheReadInputTokens"] == 25348
    by_task, _ = ledger.summary("task")
    assert set(by_task) == {"webapp/001-setup", "cli/002-parse"}
    assert set(ledger.summary("model")[0]) == {"claude-sonnet-4-5", "(default)"}
    # An append after the cut line starts on a line of its own, and nothing is lost.
    ledger.append(entry(23, 1.5))
    again = Ledger(folder)
    again.load()
    assert again.skipped == 1
    assert again.summary("day")[0]["2026-11-23"].cost_usd == pytest.approx(1.5)
    assert again.summary("day")[1].iterations == 4


def test_totals_by_each_grouping_with_bounds_and_one_repository(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    for e in (
        entry(1, 1.0, repo="a"),
        entry(1, 2.0, repo="b", backend="codex"),
        entry(2, 4.0, repo="a", task="002-y"),
        entry(30, 8.0, repo="a"),
    ):
        ledger.append(e)
    reread = Ledger(tmp_path / "ledger")
    reread.load()
    for led in (ledger, reread):
        assert {k: v.cost_usd for k, v in led.summary("repo")[0].items()} == {"a": 13.0, "b": 2.0}
        assert {k: v.cost_usd for k, v in led.summary("backend")[0].items()} == {
            "claude": 13.0,
            "codex": 2.0,
        }
        groups, total = led.summary("task", since="2026-11-02", until="2026-11-29", repo="a")
        assert {k: v.cost_usd for k, v in groups.items()} == {"a/002-y": 4.0}
        assert total.cost_usd == 4.0 and total.tokens["inputTokens"] == 10
        assert led.day_total("2026-11-01").cost_usd == 3.0
        assert led.day_total("2026-11-01", repo="b").iterations == 1
    assert sorted(p.name for p in (tmp_path / "ledger").iterdir()) == ["ledger-2026-11.jsonl"]


def test_each_days_spend_split_by_repository(tmp_path: Path) -> None:
    """What the dashboard's spend chart stacks: per day, each repository's part."""
    ledger = Ledger(tmp_path / "ledger")
    for e in (
        entry(1, 1.0, repo="a"),
        entry(1, 2.0, repo="b"),
        entry(1, 0.5, repo="a", task="002-y"),
        entry(2, 4.0, repo="a"),
        entry(30, 8.0, repo="b"),
    ):
        ledger.append(e)

    def costs(split: dict[str, dict[str, Totals]]) -> dict[str, dict[str, float]]:
        return {k: {p: t.cost_usd for p, t in parts.items()} for k, parts in split.items()}

    assert costs(ledger.breakdown("day", "repo")) == {
        "2026-11-01": {"a": 1.5, "b": 2.0},
        "2026-11-02": {"a": 4.0},
        "2026-11-30": {"b": 8.0},
    }
    bounded = ledger.breakdown("repo", "day", since="2026-11-02", repo="b")
    assert costs(bounded) == {"b": {"2026-11-30": 8.0}}
    assert bounded["b"]["2026-11-30"].iterations == 1
    # the parts add up to the summary's groups
    for key, parts in ledger.breakdown("day", "task").items():
        total = sum(t.cost_usd for t in parts.values())
        assert total == pytest.approx(ledger.summary("day")[0][key].cost_usd)


def test_a_file_of_an_unknown_version_is_refused_clearly(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    (folder / "ledger-2027-01.jsonl").write_text(
        '{"schemaVersion": 2, "kind": "pokeralph-ledger"}\n'
    )
    with pytest.raises(CorruptFile, match="ledger version 2 is not one this daemon reads"):
        Ledger(folder).load()


def test_a_months_file_is_never_followed_through_a_link(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    (folder / "ledger-2026-11.jsonl").symlink_to(tmp_path / "elsewhere")
    from pokeralphd.errors import StorageError

    with pytest.raises(StorageError, match="cost ledger"):
        Ledger(folder).append(entry(1, 1.0))
    assert not (tmp_path / "elsewhere").exists()


def test_a_query_does_not_wait_for_an_append_on_its_way_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event loop asks for today's spend before every agent run (the budget) and in
    daemon.status: an append's fsync in a worker thread must not hold it up."""
    ledger = Ledger(tmp_path / "ledger")
    ledger.load()
    syncing, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        syncing.set()
        release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    writer = threading.Thread(target=ledger.append, args=(entry(23, 1.0),))
    writer.start()
    try:
        assert syncing.wait(30)
        answered: list[float] = []
        reader = threading.Thread(
            target=lambda: answered.append(ledger.day_total("2026-11-23").cost_usd)
        )
        reader.start()
        reader.join(10)
        assert answered == [0.0], "the query waited for the append's fsync"
    finally:
        release.set()
        writer.join(30)
    assert ledger.day_total("2026-11-23").cost_usd == pytest.approx(1.0)
