"""The dashboard service: a loopback HTTP server inside the daemon's event loop.

``run`` binds ``127.0.0.1`` (the port of ``--web-port``, or a free one), writes the
per-user secret and ``pokeralphd.web.json`` (URL, port, pid, this start's instance id;
both 0600) beside the socket, where ``pokeralphctl web`` finds them, and serves the Starlette app of
:mod:`pokeralphd.web.app` with Hypercorn until the daemon stops it. Hypercorn runs as a
coroutine of our loop and, given a shutdown trigger, installs no signal handlers: the
daemon keeps SIGTERM and SIGINT to itself.

It is also the host of the WebSocket connections (what :class:`ClientConnection` needs of
a server): it counts them against ``max_connections``, and at shutdown stops reading from
them and waits, as the Unix server does, for their last replies to go out.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pokeralph_core.weblink import info_path, token_path
from pokeralphd.protocol import jsonrpc
from pokeralphd.server.accept import refusal
from pokeralphd.server.connection import ConnectionSet
from pokeralphd.server.context import CallContext
from pokeralphd.web.auth import Gate, load_or_create_secret
from pokeralphd.web.transport import WebSocketConnection, WebSocketStream

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from starlette.websockets import WebSocket

    from pokeralphd.server.context import Services
    from pokeralphd.server.dispatch import Dispatcher
    from pokeralphd.settings import DaemonSettings

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"


class WebService(ConnectionSet):
    def __init__(
        self,
        dispatcher: Dispatcher,
        services: Services,
        settings: DaemonSettings,
        socket_path: Path,
    ) -> None:
        super().__init__()
        self.dispatcher = dispatcher
        self.services = services
        self.settings = settings
        self.info_file = Path(info_path(str(socket_path)))
        self.token_file = Path(token_path(str(socket_path)))
        self.url: str | None = None
        self.port: int | None = None
        self.gate: Gate | None = None
        self._stop = anyio.Event()
        self._done = anyio.Event()  # run has returned

    # -- what the routes use
    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request through the dispatcher, as a connection without events would; the
        reply as it would be on the wire."""
        request = jsonrpc.parse_request(
            {"jsonrpc": "2.0", "id": 0, "method": method, "params": params}
        )
        assert isinstance(request, jsonrpc.Request)
        reply = await self.dispatcher.call(request, CallContext(self.services, None))
        assert reply is not None
        wire: dict[str, Any] = jsonrpc.decode(jsonrpc.encode(reply))  # as a client reads it
        return wire

    async def serve_websocket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        stream = WebSocketStream(websocket.receive, websocket.send)
        if self._stop.is_set() or len(self.connections) >= self.settings.max_connections:
            body = jsonrpc.encode(refusal(self.settings.max_connections))
            await stream.send(body + b"\n")
            await stream.aclose()
            return
        client, server = websocket.scope.get("client"), websocket.scope.get("server")
        await WebSocketConnection(self, stream, client, server).serve()

    # -- the service's life
    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((LOOPBACK, self.settings.web_port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        return sock

    def _write_info(self) -> None:
        assert self.gate is not None
        info = {
            "url": self.url,
            "port": self.port,
            "pid": os.getpid(),
            "instance": self.gate.instance,
        }
        data = json.dumps(info).encode()
        tmp = self.info_file.with_name(f".{self.info_file.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data + b"\n")
        os.replace(tmp, self.info_file)

    def _remove_info(self) -> None:
        try:
            if json.loads(self.info_file.read_bytes()).get("pid") == os.getpid():
                self.info_file.unlink()
        except (OSError, ValueError, AttributeError):
            pass

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until :meth:`stop_accepting`; ``started`` once the port takes clients."""
        try:
            await self._run(task_status)
        finally:
            self._done.set()

    async def _run(self, task_status: TaskStatus[None]) -> None:
        # Hypercorn and Starlette take ~0.2 s to import: in a worker thread, so the socket
        # (already serving) answers meanwhile; the imports below then find them loaded.
        await anyio.to_thread.run_sync(_import_web_stack)
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        from pokeralphd.web.app import build_app

        try:
            sock = self._bind()
        except OSError as exc:
            log.error(
                "the dashboard is off: cannot listen on %s:%s: %s",
                LOOPBACK,
                self.settings.web_port,
                exc,
            )
            task_status.started()
            return
        self.port = sock.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{self.port}/"
        # the secret may be made (and fsynced) now: off the loop, which serves the socket
        secret = await anyio.to_thread.run_sync(load_or_create_secret, self.token_file)
        self.gate = Gate(secret, self.port)
        await anyio.to_thread.run_sync(self._write_info)
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.accesslog = None
        config.errorlog = log
        config.include_server_header = False
        config.graceful_timeout = 2.0
        # Ours answers past max_message with MESSAGE_TOO_LARGE; Hypercorn's own cap is
        # the last resort behind it.
        config.websocket_max_message_size = 2 * self.settings.max_message + (64 << 10)
        log.info("dashboard on %s", self.url)
        task_status.started()
        try:
            await serve(build_app(self, self.gate), config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._remove_info)

    def stop_accepting(self) -> None:
        self._stop.set()

    async def close_all(self, grace: float) -> None:
        """Stop reading from every WebSocket (queued replies still go out), then wait up
        to ``grace`` seconds for them, and for the server's own ending."""
        with anyio.move_on_after(grace):
            await self.close_connections(grace)
            await self._done.wait()  # the server's own ending (HTTP keep-alives)


def _import_web_stack() -> None:
    """Load Hypercorn, Starlette and the app (when the dashboard starts: a daemon started
    with --no-web never loads them)."""
    for name in ("hypercorn.asyncio", "hypercorn.config", "pokeralphd.web.app"):
        importlib.import_module(name)
