"""A confined run's own socket: the only way to the daemon from inside the sandbox.

The daemon's main socket is not visible in a sandbox. Each confined run gets a Unix socket
of its own (made by :class:`~pokeralphd.sandbox.service.SandboxService` in the daemon's
runtime folder, bound inside at a fixed path and named in ``POKERALPH_SOCKET``), served
here with the daemon's own dispatcher. Every connection on it is in that run's agent
scope by construction (no ``/proc`` lookup, whatever the peer says or carries): the
dispatcher lets it call only the methods marked for agents (``deliver``, asking a
person, reading its own task's work), kept to its own repository and task.

Bounded: at most :data:`MAX_RUN_CONNECTIONS` connections at once per run (one more is
refused with the usual JSON-RPC error), with the daemon's limits per connection. When
the run ends the listener is closed, the socket removed and its connections closed.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from pokeralphd.server.accept import Acceptor
from pokeralphd.server.connection import ClientConnection, ConnectionSet

if TYPE_CHECKING:
    from anyio.abc import SocketStream, TaskStatus

    from pokeralphd.proc import AgentScope
    from pokeralphd.server.context import Services
    from pokeralphd.server.dispatch import Dispatcher
    from pokeralphd.settings import DaemonSettings

MAX_RUN_CONNECTIONS = 16
CLOSE_GRACE = 2.0  # seconds a run's clients get to take their last replies


class RunSocket(ConnectionSet):
    """The connections of one run's socket (a :class:`ClientConnection` host)."""

    def __init__(self, owner: RunSockets, scope: AgentScope) -> None:
        super().__init__()
        self.settings = owner.settings
        self.dispatcher = owner.dispatcher
        self.services = owner.services
        self.scope = scope

    async def serve_client(self, stream: SocketStream) -> None:
        await ClientConnection(self, stream, None, self.scope).serve()


class RunSockets:
    """Serves runs' sockets with the daemon's dispatcher and services."""

    def __init__(self, dispatcher: Dispatcher, services: Services, settings: DaemonSettings):
        self.dispatcher = dispatcher
        self.services = services
        self.settings = settings
        self.open = 0  # run sockets being served

    async def serve(
        self,
        path: str,
        scope: AgentScope,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``path`` (mode 0600) with every connection in ``scope``, until
        cancelled; then close its connections and remove the socket."""
        listener = await anyio.create_unix_listener(path)
        run = RunSocket(self, scope)
        self.open += 1
        try:
            os.chmod(path, 0o600)
            acceptor = Acceptor(
                run.serve_client,
                max_connections=MAX_RUN_CONNECTIONS,
                fd_reserve=self.settings.fd_reserve,
            )
            async with anyio.create_task_group() as tg:
                task_status.started()
                try:
                    await acceptor.serve(listener, tg)
                finally:
                    with anyio.CancelScope(shield=True):
                        await listener.aclose()
                        await run.close_connections(CLOSE_GRACE)
                    tg.cancel_scope.cancel()
        finally:
            self.open -= 1
            with contextlib.suppress(OSError):
                os.unlink(path)
            with anyio.CancelScope(shield=True):
                await listener.aclose()
