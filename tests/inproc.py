"""The daemon inside the test's own event loop, and an async JSON-RPC client for it.

``running_daemon(home)`` builds a real :class:`Daemon` on a real Unix socket in a short
temp folder and serves it in the test's task group; ``Client`` speaks newline-delimited
JSON-RPC to it over a real connection. Most integration tests use these; subprocess
daemons are kept for what needs a process boundary (signals, kill -9, the CLI).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream

from pokeralph_core.userdirs import Paths
from pokeralphd import unixstream
from pokeralphd.daemon import Daemon
from pokeralphd.settings import DaemonSettings
from tests.helpers import DaemonProcess


class RpcError(Exception):
    """Raised by :meth:`Client.call` when the daemon answers with an error object."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error["code"]
        self.message: str = error["message"]
        self.data: Any = error.get("data")


class Client:
    """One connection: calls by id (concurrently), events into a queue."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self.events_send, self.events = anyio.create_memory_object_stream[dict[str, Any]](10_000)
        self._buf = b""

    async def _read(self) -> None:
        try:
            while True:
                chunk = await self.stream.receive(1 << 16)
                self._buf += chunk
                *lines, self._buf = self._buf.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    if "id" in message and message.get("id") in self._waiting:
                        event, box = self._waiting.pop(message["id"])
                        box.append(message)
                        event.set()
                    elif message.get("method") == "event":
                        await self.events_send.send(message["params"])
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            for event, _box in self._waiting.values():
                event.set()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        rid = next(self._ids)
        event: anyio.Event = anyio.Event()
        box: list[dict[str, Any]] = []
        self._waiting[rid] = (event, box)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        await self.stream.send(json.dumps(message).encode() + b"\n")
        with anyio.fail_after(30):
            await event.wait()
        if not box:
            raise ConnectionError(f"the connection closed before {method} was answered")
        if "error" in box[0]:
            raise RpcError(box[0]["error"])
        return box[0]["result"]

    async def next_event(self, timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await self.events.receive()

    async def events_until(self, types: set[str], timeout: float = 60) -> list[dict[str, Any]]:
        """Events up to and including the first of ``types``."""
        seen = []
        with anyio.fail_after(timeout):
            while True:
                event = await self.events.receive()
                seen.append(event)
                if event["type"] in types:
                    return seen


@dataclass
class InProcDaemon:
    daemon: Daemon
    paths: Paths
    home: Path
    _tg: Any

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        stream = await unixstream.connect(self.paths.socket)
        client = Client(stream)
        scope = anyio.CancelScope()

        async def read() -> None:
            with scope:
                await client._read()

        # The reader runs in the daemon's task group, so errors of the test's own body
        # are not wrapped in an exception group.
        self._tg.start_soon(read)
        try:
            yield client
        finally:
            await stream.aclose()
            scope.cancel()
            client.events_send.close()
            client.events.close()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        async with self.client() as client:
            return await client.call(method, params)


def paths_for(home: Path) -> Paths:
    """Where a test daemon under ``home`` keeps things: what the XDG variables that
    ``tests.helpers.DaemonProcess`` sets would give, so both kinds share a home."""
    return Paths(
        socket=home / "run" / "d.sock",
        state_dir=home / "state" / "pokeralph",
        config_dir=home / "config" / "pokeralph",
    )


async def setup_task(
    d: InProcDaemon,
    repo: Path,
    agent: dict[str, Any],
    task: tuple[str, str, str] = ("Make it work", "Write work.txt", "work.txt exists"),
    **config: Any,
) -> str:
    """Register ``repo`` for ``agent``: YOLO, one iteration, a test loop that passes
    (``config`` on top); add the task ``(title, description, criterion)``; its id. The
    in-process twin of ``battle_helpers.setup_repo`` (which tests/real cannot import)."""
    await d.call("repo.register", {"path": str(repo)})
    patch: dict[str, Any] = {
        "agent": agent,
        "mode": "yolo",
        "maxIterationsPerTask": 1,
        "feedbackLoops": ["test"],
        "feedbackCommands": {"test": "true"},
        **config,
    }
    await d.call("config.update", {"repo": str(repo), "patch": patch})
    title, description, criterion = task
    created = await d.call(
        "task.create",
        {
            "repo": str(repo),
            "title": title,
            "description": description,
            "acceptanceCriteria": [criterion],
        },
    )
    return str(created["task"]["id"])


@asynccontextmanager
async def running_daemon(
    home: Path,
    settings: DaemonSettings | None = None,
    *,
    web: bool = False,
    sandbox: bool = False,
) -> AsyncIterator[InProcDaemon]:
    paths = paths_for(home)
    daemon = Daemon(paths, _settings(settings, web, sandbox))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: daemon.run(handle_signals=False))
        with anyio.fail_after(20):
            await daemon.ready.wait()
        try:
            yield InProcDaemon(daemon, paths, home, tg)
        finally:
            daemon.shutdown_requested.set()


def _settings(settings: DaemonSettings | None, web: bool, sandbox: bool = False) -> DaemonSettings:
    """``settings`` (the defaults if none) with the dashboard as ``web`` says: off unless
    asked, as for ``DaemonProcess`` (only the dashboard's own tests need it, and
    ``DaemonSettings.web`` itself defaults to on); and the sandbox likewise (its own
    tests turn it on: tests/integration/test_sandbox_battle.py; the others' fake agents
    and scripted model servers live in temporary folders a sandbox hides)."""
    return (settings or DaemonSettings()).model_copy(update={"web": web, "sandbox": sandbox})


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class ThreadedDaemon(DaemonProcess):
    """The daemon in this process, on a background thread's event loop (a blocking
    portal), behind :class:`DaemonProcess`'s synchronous API.

    For the many tests that talk to the daemon with the standard-library client or the
    CLI and need no process boundary: no interpreter to start, no imports to repeat.
    Signals, ``kill -9`` and socket activation need a real process: use
    :class:`DaemonProcess` for those.
    """

    def __init__(
        self,
        home: Path,
        settings: DaemonSettings | None = None,
        *,
        web: bool = False,
        sandbox: bool = False,
    ) -> None:
        self.settings = _settings(settings, web, sandbox)
        super().__init__(home, web=self.settings.web)
        self.paths = paths_for(home)
        self.daemon: Daemon | None = None
        self._logs = _LogCapture()

    def start(self, wait: bool = True) -> ThreadedDaemon:
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        logging.getLogger("pokeralphd").addHandler(self._logs)
        daemon = self.daemon = self.portal.call(Daemon, self.paths, self.settings)
        self._future = self.portal.start_task_soon(
            functools.partial(daemon.run, handle_signals=False)
        )

        async def ready() -> None:
            with anyio.fail_after(20):
                await daemon.ready.wait()

        try:
            self.portal.call(ready)
        except BaseException:
            self.stop()
            raise
        return self

    def running(self) -> bool:
        return self.daemon is not None and not self._future.done()

    @property
    def pid(self) -> int:
        return os.getpid()

    def logs(self) -> str:
        return "\n".join(self._logs.lines)

    def stop(self, sig: int = 0, timeout: float = 20) -> int:
        if self.daemon is not None:
            self.portal.call(self.daemon.shutdown_requested.set)
            try:
                self._future.result(timeout)
            finally:
                self.daemon = None
                self._portal_cm.__exit__(None, None, None)
                logging.getLogger("pokeralphd").removeHandler(self._logs)
        return 0

    def kill9(self) -> None:
        raise NotImplementedError("kill -9 needs a real process: use DaemonProcess")
