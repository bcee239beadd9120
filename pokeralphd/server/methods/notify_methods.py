"""``notify.*``: the notifications that find a person (issue 26)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import NotifyTestParams
from pokeralphd.protocol.results import NotifyTestResult

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "notify.test",
        NotifyTestParams,
        "Send one test notification on a channel (desktop, or a webhook's name; every "
        "configured one when omitted): one attempt each, within its rate limit; whether "
        "each got through, and why not.",
        result=NotifyTestResult,
    )
    async def test(ctx: CallContext, params: NotifyTestParams) -> NotifyTestResult:
        """Invoked when calling ``pokeralphctl notify test``."""
        notify = ctx.services.notify
        if notify is None:
            raise InvalidParams("this daemon runs no notifier", field="channel")
        return await notify.test(params.channel)
