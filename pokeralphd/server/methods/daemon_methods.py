"""``daemon.*`` and ``rpc.discover``: liveness, status, shutdown, and the method list."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.protocol.params import NoParams
from pokeralphd.protocol.results import DaemonStatus, OpenRpcDocument, Pong, ShutdownResult

if TYPE_CHECKING:
    import msgspec

    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add("daemon.ping", NoParams, 'Liveness check; answers "pong".', result=Pong, agent=True)
    def ping(ctx: CallContext, params: NoParams) -> Pong:  # never waits: a plain function
        return "pong"

    @table.add(
        "daemon.status",
        NoParams,
        "Version, pid, uptime, socket, repositories, clients.",
        result=DaemonStatus,
    )
    async def status(ctx: CallContext, params: NoParams) -> DaemonStatus:
        return ctx.services.status()

    @table.add(
        "daemon.shutdown",
        NoParams,
        "Stop the daemon gracefully (as SIGTERM does).",
        result=ShutdownResult,
    )
    async def shutdown(ctx: CallContext, params: NoParams) -> ShutdownResult:
        ctx.services.request_shutdown()
        return ShutdownResult(stopping=True)

    @table.add(
        "rpc.discover",
        NoParams,
        "The OpenRPC document of every method.",
        result=OpenRpcDocument,
        agent=True,
    )
    async def discover(ctx: CallContext, params: NoParams) -> msgspec.Raw:
        return await ctx.services.discover()
