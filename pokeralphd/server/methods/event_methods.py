"""``events.subscribe`` / ``events.unsubscribe``: the event stream of a connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.errors import InvalidState, NotFound
from pokeralphd.protocol.params import SubscribeParams, UnsubscribeParams
from pokeralphd.protocol.results import SubscribeResult, UnsubscribeResult

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "events.subscribe",
        SubscribeParams,
        "Receive `event` notifications, filtered by repo, types and task; `since` replays "
        "from history and reports how many events were already dropped.",
        result=SubscribeResult,
    )
    async def subscribe(ctx: CallContext, params: SubscribeParams) -> SubscribeResult:
        conn = ctx.conn
        if conn is None:
            raise InvalidState("events.subscribe needs a connection")
        repo = ctx.repos.resolve(params.repo, usable=False).name if params.repo else None
        bus = ctx.services.bus
        sub = bus.subscribe(conn.deliver, repo, params.types, params.task_id)
        conn.subscriptions.add(sub.id)
        result = SubscribeResult(subscription=sub.id, seq=bus.seq, epoch=ctx.services.epoch)
        if params.since is not None:
            # a replay that overflowed the backlog would be dropped whole, and so would
            # every resumption after it be
            events, lost = bus.replay(sub, params.since, conn.replay_budget)
            result.replayed = len(events)
            result.lost = lost
            if lost:
                result.oldest_seq = events[0].seq if events else bus.seq + 1

            def replay() -> None:
                for event in events:
                    if not conn.deliver(event):
                        break

            ctx.after_reply.append(replay)
        return result

    @table.add(
        "events.unsubscribe",
        UnsubscribeParams,
        "Stop one subscription (or all of this connection's when none is named).",
        result=UnsubscribeResult,
    )
    async def unsubscribe(ctx: CallContext, params: UnsubscribeParams) -> UnsubscribeResult:
        conn = ctx.conn
        if conn is None:
            raise InvalidState("events.unsubscribe needs a connection")
        ids = (
            [params.subscription] if params.subscription is not None else sorted(conn.subscriptions)
        )
        for sub_id in ids:
            if sub_id not in conn.subscriptions:
                raise NotFound(f"no subscription {sub_id} on this connection", subscription=sub_id)
            conn.subscriptions.discard(sub_id)
            ctx.services.bus.unsubscribe(sub_id)
        return UnsubscribeResult(unsubscribed=ids)
