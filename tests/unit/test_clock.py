"""Timeouts on a clock the test moves: no real waiting for a watchdog or a run timeout."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import AgentEvent, AgentRequest, AgentStarted, AgentText
from pokeralphd.agents.runner import run_agent
from pokeralphd.clock import wait_or_timeout
from tests.fakeclock import FakeClock
from tests.helpers import FAKES

pytestmark = pytest.mark.anyio


async def _run(
    mode: str,
    tmp_path: Path,
    clock: FakeClock,
    *,
    timeout: float | None = None,
    idle_timeout: float | None = None,
) -> tuple[str, str]:
    config = AgentConfig(
        backend="claude", command=str(FAKES / "fake_claude"), env={"FAKE_CLAUDE_MODE": mode}
    )
    request = AgentRequest(
        prompt="go",
        cwd=tmp_path,
        mode="execute",
        config=config,
        clock=clock,
        timeout=timeout,
        idle_timeout=idle_timeout,
    )
    started = anyio.Event()
    spoke = anyio.Event()

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, AgentStarted):
            started.set()
        if isinstance(event, AgentText):
            spoke.set()

    result: list[tuple[str, str]] = []

    async def run() -> None:
        outcome = await run_agent(get_backend(config), request, on_event, lambda _line: None)
        result.append((outcome.reason, outcome.error or ""))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            if mode == "hang":
                await spoke.wait()
            await clock.sleeping.wait()
            await anyio.lowlevel.checkpoint()
            assert not result  # nothing ends the run until the clock moves
            clock.advance(10_000)
    return result[0]


async def test_the_idle_watchdog_fires_when_the_clock_says_so(tmp_path: Path) -> None:
    reason, error = await _run("silent_hang", tmp_path, FakeClock(), idle_timeout=60)
    assert reason == "idle"
    assert "printed nothing for 60 s" in error


async def test_the_run_timeout_fires_when_the_clock_says_so(tmp_path: Path) -> None:
    reason, error = await _run("hang", tmp_path, FakeClock(), timeout=600)
    assert reason == "timeout"
    assert "10-minute iteration timeout" in error


async def test_wait_or_timeout() -> None:
    clock = FakeClock()
    event = anyio.Event()
    async with anyio.create_task_group() as tg:
        results: list[bool] = []

        async def wait() -> None:
            results.append(await wait_or_timeout(event, clock, 30))

        tg.start_soon(wait)
        await clock.sleeping.wait()
        clock.advance(29)
        await anyio.lowlevel.checkpoint()
        assert results == []
        clock.advance(1)
    assert results == [False]
    event.set()
    assert await wait_or_timeout(event, clock, 30)
