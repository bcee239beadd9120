"""Following a battle with an injected fake daemon: approvals, exit codes, growing logs."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pokeralphctl.commands import Context
from pokeralphctl.commands.follow import follow_log, start_and_follow
from pokeralphctl.commands.stream import EventStream
from pokeralphctl.output import Output
from pokeralphctl.terminal import Terminal


class FakeStream(EventStream):
    """Hands out scripted events; ``before`` runs as each event is taken."""

    def __init__(self, ctx: Context, events: list[dict[str, Any]], **filters: Any) -> None:
        super().__init__(ctx, **filters)
        self.scripted = events
        self.opened = False

    def open(self) -> dict[str, Any]:
        self.opened = True
        return {"subscription": 1, "seq": 0}

    def events(self) -> Iterator[dict[str, Any]]:
        assert self.opened, "subscribe before acting"
        for event in self.scripted:
            hook = event.pop("before", None)
            if hook:
                hook()
            yield event

    def close(self) -> None:
        pass


class FakeDaemon(Context):
    """A Context whose requests are answered by a dict of handlers and recorded."""

    def __init__(self, json_mode: bool = False, stdin: io.StringIO | None = None) -> None:
        self.buffer = io.StringIO()
        err = io.StringIO()
        out = Output(json_mode=json_mode, stdout=self.buffer, stderr=err)
        term = Terminal({}, "/work/shop", stdin or io.StringIO(), self.buffer, err)
        super().__init__(term, out, "/work/shop", False)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.filters: dict[str, Any] = {}
        self.log = b""
        self.status = "running"

    def stream(self, **filters: Any) -> EventStream:
        self.filters = filters
        return FakeStream(self, self.events, **filters)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        params = params or {}
        self.calls.append((method, params))
        if method == "battle.start":
            return {"battle": {"taskId": params["taskId"], "mode": "hitl"}, "queued": False}
        if method == "battle.approve":
            return {"battle": {"taskId": params.get("taskId")}, "approved": params["approve"]}
        if method == "battle.history":
            return {"battle": {"status": self.status, "iterations": []}, "version": 1}
        if method == "battle.log":
            if params.get("tail") is not None:
                lines = self.log.splitlines(keepends=True)[-params["tail"] :]
                data = b"".join(lines)
                start = len(self.log) - len(data)
            else:
                start = params.get("offset", 0)
                data = self.log[start : start + 4]  # small pieces: exercise the reading loop
            return {
                "iteration": params.get("iteration") or 1,
                "data": data.decode(),
                "offset": start,
                "nextOffset": start + len(data),
                "size": len(self.log),
            }
        raise AssertionError(f"unexpected call {method}")

    def stdout(self) -> str:
        return self.buffer.getvalue()


def event(kind: str, **payload: Any) -> dict[str, Any]:
    return {
        "seq": 1,
        "type": kind,
        "repo": "shop",
        "taskId": "001-x",
        "payload": {"taskId": "001-x", **payload},
        "timestamp": "2025-01-01T12:00:00Z",
    }


class TypedInput(io.StringIO):
    """What a person types at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("last", "code"), [("battle_complete", 0), ("battle_failed", 1)])
def test_follow_asks_for_approval_on_a_terminal(last: str, code: int) -> None:
    ctx = FakeDaemon(stdin=TypedInput("\nadd a test\n"))
    ctx.events = [
        event("iteration_output", iteration=1, chunks=[{"kind": "text", "text": "working"}]),
        event("await_approval", iteration=1, result="success"),
        event(last, iterations=1, costUsd=0.1, error="boom"),
    ]
    args = argparse.Namespace()
    assert start_and_follow(ctx, args, ctx.params(taskId="001-x", mode="hitl")) == code
    assert ctx.filters == {"repo": "/work/shop", "task_id": "001-x"}
    assert [m for m, _ in ctx.calls] == ["battle.start", "battle.approve"]
    assert ctx.calls[1][1] == {
        "taskId": "001-x",
        "approve": True,
        "note": "add a test",
        "repo": "/work/shop",
    }
    assert "working" in ctx.stdout()


def test_follow_without_a_terminal_only_shows_the_hint() -> None:
    ctx = FakeDaemon(json_mode=True, stdin=io.StringIO("y\n"))
    ctx.events = [event("await_approval", iteration=2, result="success")]
    ctx.events.append(event("battle_cancelled", iterations=2))
    assert start_and_follow(ctx, argparse.Namespace(), ctx.params(taskId="001-x")) == 1
    assert [m for m, _ in ctx.calls] == ["battle.start"]
    lines = [json.loads(line) for line in ctx.stdout().splitlines()]
    assert lines[0]["ok"] is True and lines[0]["result"]["battle"]["taskId"] == "001-x"
    assert [e["type"] for e in lines[1:]] == ["await_approval", "battle_cancelled"]


def test_log_follow_reads_from_the_last_offset_on_each_event() -> None:
    ctx = FakeDaemon()
    ctx.log = b"one\ntwo\nthree\n"

    def grow(text: bytes) -> Any:
        return lambda: setattr(ctx, "log", ctx.log + text)

    ctx.events = [
        {**event("iteration_output", iteration=1, chunks=[]), "before": grow(b"four\n")},
        {**event("iteration_end", iteration=1, result="success"), "before": grow(b"five!\n")},
        {**event("battle_complete", iterations=1, costUsd=0), "before": grow(b"")},
    ]
    params = ctx.params(taskId="001-x", tail=2)
    assert follow_log(ctx, argparse.Namespace(), params) == 0
    assert ctx.stdout() == "two\nthree\nfour\nfive!\n"
    assert ctx.filters["types"][:3] == ["iteration_start", "iteration_output", "iteration_end"]


def test_log_follow_of_a_finished_battle_ends_at_once() -> None:
    ctx = FakeDaemon()
    ctx.log = b"done\n"
    ctx.status = "completed"
    assert follow_log(ctx, argparse.Namespace(), ctx.params(taskId="001-x")) == 0
    assert ctx.stdout() == "done\n"
