"""The Unix-socket transport: accept clients, check who they are, serve each one.

A client whose uid is not ours is refused before it can send a byte. Every other client is
looked up (``ProcessOwner.identify``), whether a run is under way or not: a process of one
of our runs, or one with our mark, is served in the agent scope, and so is a peer that
cannot be identified (no pid, gone before the lookup). Each accepted client is a
:class:`ClientConnection` in the server's task group; the server knows the open
connections so that shutdown can close them and wait for them to go.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from pokeralphd.server.accept import Acceptor
from pokeralphd.server.connection import ClientConnection, ConnectionSet
from pokeralphd.server.listener import peer_credentials
from pokeralphd.unixstream import on_transport

if TYPE_CHECKING:
    from anyio.abc import SocketListener, SocketStream, TaskStatus

    from pokeralphd.server.context import Services
    from pokeralphd.server.dispatch import Dispatcher
    from pokeralphd.settings import DaemonSettings

log = logging.getLogger(__name__)


class Server(ConnectionSet):
    def __init__(self, dispatcher: Dispatcher, services: Services, settings: DaemonSettings):
        super().__init__()
        self.dispatcher = dispatcher
        self.services = services
        self.settings = settings
        self._accepting: anyio.CancelScope | None = None

    # -- serving
    async def serve(
        self,
        listener: SocketListener,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept clients (until :meth:`stop_accepting`) and serve each in its own task,
        until cancelled. The acceptor guards each connection: a failure ends only it."""
        acceptor = Acceptor(
            self.serve_client,
            max_connections=self.settings.max_connections,
            fd_reserve=self.settings.fd_reserve,
        )
        async with anyio.create_task_group() as tg:
            self._accepting = anyio.CancelScope()
            task_status.started()
            with self._accepting:
                await acceptor.serve(listener, tg)
            await anyio.sleep_forever()  # the clients go on until the daemon stops us

    def stop_accepting(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()

    async def serve_client(self, stream: SocketStream) -> None:
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        try:
            pid, uid = peer_credentials(raw)
        except OSError:
            pid, uid = None, None
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %s (pid %s)", uid, pid)
            await stream.aclose()
            return
        # With no run under way identify reads one environment (~20 µs on Linux): on the
        # loop, where a worker thread's round trip alone costs more. With runs it walks
        # the process's parents, group and session too: in a thread.
        identify = self.services.identify
        if self.services.agents_running():
            scope = await anyio.to_thread.run_sync(identify, pid)
        else:
            scope = identify(pid)
        if scope is not None:
            log.info("connection from %s (pid %s): agent scope", scope.describe(), pid)
        served = await on_transport(stream)  # see pokeralphd.unixstream
        try:
            await ClientConnection(self, served, pid, scope).serve()
        finally:
            with anyio.CancelScope(shield=True):
                await served.aclose()

    async def close_all(self, grace: float) -> None:
        """Stop reading from every client, then wait up to ``grace`` seconds for them."""
        await self.close_connections(grace)
