"""What a method handler may use: a typed services context, and the calling connection.

Handlers never see the daemon. They get :class:`Services` (the repositories, the event
bus, the daemon-wide battle engine and inbox, the method table, and the two daemon-level
actions a client may ask for: status and shutdown) through :class:`CallContext`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import msgspec

    from pokeralphd.battle.engine import BattleEngine
    from pokeralphd.inbox.service import InboxService
    from pokeralphd.repositories import Repositories
    from pokeralphd.server.eventbus import Event, EventBus


class Caller(Protocol):
    """The connection a request came on (for subscriptions)."""

    subscriptions: set[int]

    def deliver(self, event: Event) -> bool: ...


@dataclass(eq=False)
class Services:
    repos: Repositories
    bus: EventBus
    battles: BattleEngine
    inbox: InboxService
    discover: Callable[[], Awaitable[msgspec.Raw]]  # the encoded OpenRPC document
    epoch: str  # names this daemon process: sequence numbers belong to it
    status: Callable[[], dict[str, Any]]
    request_shutdown: Callable[[], None]


class CallContext:
    """One call: the services, the calling connection, hooks run after the reply."""

    __slots__ = ("after_reply", "conn", "services")

    def __init__(self, services: Services, conn: Caller | None) -> None:
        self.services = services
        self.conn = conn
        self.after_reply: list[Callable[[], None]] = []

    @property
    def repos(self) -> Repositories:
        return self.services.repos
