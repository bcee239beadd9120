"""``daemon.*`` and ``rpc.discover``: liveness, status, shutdown, and the method list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import NoParams

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add("daemon.ping", NoParams, 'Liveness check; answers "pong".')
    async def ping(ctx: CallContext, params: NoParams) -> str:
        return "pong"

    @table.add("daemon.status", NoParams, "Version, pid, uptime, socket, repositories, clients.")
    async def status(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        return ctx.services.status()

    @table.add("daemon.shutdown", NoParams, "Stop the daemon gracefully (as SIGTERM does).")
    async def shutdown(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        ctx.services.request_shutdown()
        return {"stopping": True}

    @table.add("rpc.discover", NoParams, "The OpenRPC document of every method.")
    async def discover(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        return ctx.services.discover()
