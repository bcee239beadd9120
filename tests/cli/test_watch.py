"""``watch``: events from other processes, human lines, Ctrl-C, reconnecting after a restart."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from pokeralphd.settings import DaemonSettings
from tests.helpers import DaemonProcess, run_ctl
from tests.inproc import ThreadedDaemon


class Lines:
    """A stream's lines, read by a thread, taken with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def until(self, predicate: Callable[[str], bool], timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out; lines so far: {self.seen}")
            try:
                line = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"stream ended; lines: {self.seen}")
            self.seen.append(line)
            if predicate(line):
                return line


class Watch:
    def __init__(self, env: dict[str, str], *args: str, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pokeralphctl", "watch", *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)

    def event(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        line = self.out.until(lambda text: predicate(json.loads(text)))
        event: dict[str, Any] = json.loads(line)
        return event

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(20)
        self.out.thread.join(5)
        self.err.thread.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def watches() -> Iterator[list[Watch]]:
    started: list[Watch] = []
    yield started
    for watch in started:
        watch.close()


def add_task(daemon: DaemonProcess, repo: Path, title: str) -> None:
    proc = run_ctl(daemon.env, "task", "add", title, "-d", "d", "-c", "c", cwd=repo)
    assert proc.returncode == 0, proc.stderr


def created(title: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "task_created" and e["payload"]["task"]["title"] == title


def test_watch_json_sees_a_task_added_by_another_process(
    daemon: DaemonProcess, registered: Path, watches: list[Watch]
) -> None:
    watch = Watch(daemon.env, "--json", "--since", "0", cwd=registered)
    watches.append(watch)
    first = watch.event(lambda e: e["type"] == "repo_registered")
    add_task(daemon, registered, "From elsewhere")
    event = watch.event(created("From elsewhere"))
    assert event["repo"] == "repo" and event["payload"]["task"]["id"] == "001-from-elsewhere"
    assert event["seq"] > first["seq"]
    assert watch.interrupt() == 0  # Ctrl-C ends a watch with 0


def test_watch_human_lines_and_filters(
    daemon: DaemonProcess, registered: Path, watches: list[Watch]
) -> None:
    watch = Watch(daemon.env, "--all", "--type", "task_created,task_deleted", "--since", "0")
    watches.append(watch)
    add_task(daemon, registered, "Shown")
    line = watch.out.until(lambda text: "task_created" in text)
    assert re.fullmatch(r"\d\d:\d\d:\d\d repo 001-shown task_created created: Shown", line)
    run_ctl(daemon.env, "config", "set", "mode", "yolo", cwd=registered)
    run_ctl(daemon.env, "task", "rm", "001-shown", cwd=registered)
    line = watch.out.until(lambda text: "001-shown" in text and "deleted" in text)
    assert "config" not in " ".join(watch.out.seen)  # filtered out by --type
    assert watch.interrupt() == 0


def test_watch_reconnects_after_a_restart_and_reports_lost_events(
    daemon: DaemonProcess, registered: Path, home: Path, watches: list[Watch]
) -> None:
    watch = Watch(daemon.env, "--json", "--all", "--since", "0")
    watches.append(watch)
    add_task(daemon, registered, "Before")
    watch.event(created("Before"))

    # Hold the watch still while the daemon restarts and publishes more than its new
    # history keeps; when the watch runs again it must reconnect and say what it lost.
    watch.proc.send_signal(signal.SIGSTOP)
    try:
        daemon.stop()
        second = ThreadedDaemon(home, DaemonSettings(event_history=100)).start()
        try:
            with second.connect() as conn:
                for i in range(120):
                    conn.call("prd.update", {"description": f"d{i}", "repo": str(registered)})
            add_task(second, registered, "After")
        finally:
            watch.proc.send_signal(signal.SIGCONT)
        event = watch.event(created("After"))
        assert event["repo"] == "repo"
        warning = watch.err.until(lambda text: "events were lost" in text)
        assert re.search(r"\b2[0-9] events were lost while disconnected", warning)
        assert any("restarted" in line for line in watch.err.seen)
        # and it stays subscribed to the new daemon
        add_task(second, registered, "Live")
        watch.event(created("Live"))
        assert watch.interrupt() == 0
    finally:
        second.stop()


def test_watch_since_reports_events_the_daemon_dropped(
    home: Path, repo: Path, watches: list[Watch]
) -> None:
    daemon = DaemonProcess(home, ["--event-history", "100"]).start()
    try:
        daemon.call("repo.register", {"path": str(repo)})
        with daemon.connect() as conn:
            for i in range(110):
                conn.call("prd.update", {"description": f"d{i}", "repo": str(repo)})
        watch = Watch(daemon.env, "--json", "--since", "0", cwd=repo)
        watches.append(watch)
        first = watch.event(lambda e: True)
        assert first["seq"] == 12
        warning = watch.err.until(lambda text: "events were lost" in text)
        assert "11 events were lost" in warning
        assert watch.interrupt() == 0
    finally:
        daemon.stop()
