"""``daemon.*`` and ``rpc.discover``: liveness, status, shutdown, and the method list."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec

from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.params import NoParams

if TYPE_CHECKING:
    from pokeralphd.server.dispatch import CallContext, MethodTable

# The OpenRPC document never changes during a process's life (the method table is built
# once, at start): build and encode it once per table, not on every call (~50 ms each).
_discover_cache: weakref.WeakKeyDictionary[MethodTable, msgspec.Raw] = weakref.WeakKeyDictionary()
_discover_building: weakref.WeakKeyDictionary[MethodTable, anyio.Event] = (
    weakref.WeakKeyDictionary()
)


def discover_document(table: MethodTable) -> msgspec.Raw:
    """The encoded OpenRPC document of ``table``, built on first use."""
    cached = _discover_cache.get(table)
    if cached is None:
        from pokeralphd.protocol.openrpc import openrpc_document

        cached = _discover_cache[table] = msgspec.Raw(jsonrpc.encode(openrpc_document(table)))
    return cached


async def discover_document_async(table: MethodTable) -> msgspec.Raw:
    """:func:`discover_document`, the first build in a worker thread (others go on
    being served meanwhile) and only once however many ask at the same time."""
    while (cached := _discover_cache.get(table)) is None:
        building = _discover_building.get(table)
        if building is not None:
            await building.wait()
            continue  # built (or the build failed: then try again)
        building = _discover_building[table] = anyio.Event()
        try:
            return await anyio.to_thread.run_sync(discover_document, table)
        finally:
            del _discover_building[table]
            building.set()
    return cached


def register(table: MethodTable) -> None:
    @table.add("daemon.ping", NoParams, 'Liveness check; answers "pong".')
    async def ping(ctx: CallContext, params: NoParams) -> str:
        return "pong"

    @table.add("daemon.status", NoParams, "Version, pid, uptime, socket, repositories, clients.")
    async def status(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        return ctx.daemon.status()

    @table.add("daemon.shutdown", NoParams, "Stop the daemon gracefully (as SIGTERM does).")
    async def shutdown(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        ctx.daemon.shutdown_requested.set()
        return {"stopping": True}

    @table.add("rpc.discover", NoParams, "The OpenRPC document of every method.")
    async def discover(ctx: CallContext, params: NoParams) -> msgspec.Raw:
        return await discover_document_async(ctx.daemon.table)
