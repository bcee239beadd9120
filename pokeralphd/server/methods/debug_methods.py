"""``debug.*``: only with ``pokeralphd --debug-methods``; used by the benchmarks."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pokeralphd.errors import InvalidParams
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.params import DebugEmitParams
from pokeralphd.protocol.results import EmitResult

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "debug.emit",
        DebugEmitParams,
        "Publish `count` debug events (benchmarks only).",
        result=EmitResult,
    )
    async def emit(ctx: CallContext, p: DebugEmitParams) -> EmitResult:
        if not 0 < p.count <= 1_000_000 or not 0 <= p.size <= 65536:
            raise InvalidParams("count must be 1..1000000 and size 0..65536", field="count")
        pad = "x" * p.size
        bus = ctx.services.bus
        for i in range(p.count):
            bus.publish(ev.DebugEvent(i=i, t=time.time(), pad=pad), None)
        return EmitResult(published=p.count, seq=bus.seq)
