"""The platform's sandbox probe (a trial run of bubblewrap, up to seconds) runs once, off
the event loop, as the daemon starts: never inside the first ``daemon.status`` or
``battle.start`` that asks whether runs can be confined."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import pytest

from pokeralphd.sandbox import service
from pokeralphd.sandbox.bwrap import Probe
from tests.inproc import running_daemon

pytestmark = pytest.mark.anyio


async def test_the_probe_runs_in_a_worker_thread_at_start(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []

    @functools.cache  # as the platform's probe is
    def probe() -> Probe:
        threads.append(threading.current_thread())
        return Probe(False, None, "no sandbox in this test")

    monkeypatch.setattr(service, "platform_probe", probe)
    loop_thread = threading.current_thread()
    async with running_daemon(home, sandbox=True) as d:
        status = await d.call("daemon.status")
        assert status["sandbox"]["available"] is False
    assert len(threads) == 1 and threads[0] is not loop_thread
