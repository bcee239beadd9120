"""The TUI's parts without a screen: the answer's shape, the board, the stream's stop."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pokeralphctl.tui.board import OUTPUT_BATTLES, OUTPUT_LINES, Board, reloads
from pokeralphctl.tui.link import POLL, Link
from tests.helpers import wait_until
from tests.inproc import ThreadedDaemon


def test_answers_have_the_shape_the_daemon_checks() -> None:
    from pokeralphctl.tui.forms import answer_of, number  # Textual: see tests/tui/conftest.py

    assert answer_of({"type": "confirm"}, {"value": False}) == {"value": False}
    assert answer_of({"type": "rating", "max": 5}, {"value": 4}) == {"value": 4}
    assert answer_of({"type": "select", "multiple": True}, {"value": ["a"]}) == {"value": ["a"]}
    form = {
        "type": "form",
        "fields": [
            {"name": "n", "type": "number"},
            {"name": "t", "type": "text"},
            {"name": "c", "type": "checkbox"},
        ],
    }
    assert answer_of(form, {"n": "3", "t": "  ", "c": False}) == {"values": {"n": 3, "c": False}}
    assert number("2.5") == 2.5 and number("-7") == -7 and number("soon") == "soon"


def output(task: str, text: str) -> dict[str, Any]:
    return {
        "type": "iteration_output",
        "repo": "r",
        "taskId": task,
        "payload": {"taskId": task, "iteration": 1, "chunks": [{"kind": "text", "text": text}]},
    }


def test_the_board_keeps_output_bounded_and_remembers_how_battles_ended() -> None:
    board = Board()
    for n in range(OUTPUT_LINES + 10):
        board.apply(output("001-a", f"line {n}"))
    lines = board.output[("r", "001-a")]
    assert len(lines) == OUTPUT_LINES and lines[-1] == (f"line {OUTPUT_LINES + 9}", "")
    for n in range(OUTPUT_BATTLES + 5):
        board.apply(output(f"{n + 100:03d}-b", "x"))
    assert len(board.output) == OUTPUT_BATTLES and ("r", "001-a") not in board.output

    running = {"repo": "r", "taskId": "001-a", "status": "running", "iteration": 1}
    board.load(None, {"battles": [running]}, None)
    board.apply({"type": "battle_cancelled", "repo": "r", "taskId": "001-a", "payload": {}})
    board.load(None, {"battles": []}, None)  # it left battle.current: it stays, as it ended
    assert board.battles[("r", "001-a")]["status"] == "cancelled"
    assert reloads("battle_paused") and reloads("new_delivery") and not reloads("iteration_output")


class Recorder:
    def __init__(self) -> None:
        self.connections: list[tuple[dict[str, Any], bool]] = []
        self.lost: list[str] = []
        self.events: list[dict[str, Any]] = []

    def connected(self, result: dict[str, Any], restarted: bool) -> None:
        self.connections.append((result, restarted))

    def disconnected(self, reason: str) -> None:
        self.lost.append(reason)

    def event(self, event: dict[str, Any]) -> None:
        self.events.append(event)


def test_the_stream_replays_history_and_stops_within_a_poll(
    daemon: ThreadedDaemon, repo: Path
) -> None:
    daemon.call("repo.register", {"path": str(repo)})  # an event before anyone listens
    sink, stop = Recorder(), threading.Event()
    thread = threading.Thread(target=Link(str(daemon.socket)).listen, args=(stop, sink))
    thread.start()
    try:
        wait_until(lambda: sink.connections, what="a subscription")
        wait_until(
            lambda: any(e["type"] == "repo_registered" for e in sink.events),
            what="the replayed history",
        )
    finally:
        started = time.monotonic()
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < POLL + 1.0  # a cancel ends it promptly
    assert sink.lost == []
    seqs = [e["seq"] for e in sink.events]
    assert seqs == sorted(set(seqs))  # in order, never twice
