"""The seams: small Protocols a service depends on instead of on the daemon.

This module imports no service (only the domain and the standard library), so any layer
may name these types without tying itself to another. The composition root
(``pokeralphd.daemon``) passes the real implementations in:

- :class:`EventSink`: where state changes are published (the event bus).
- :class:`Clock`: wall time, monotonic time and sleeping, so timeouts, watchdogs and
  backoff can be tested without real waiting.
- :class:`Inbox`: what a service may ask of a repository's inbox (create an item that
  needs a person, learn the answer, settle or close it).
- :class:`Lifecycle`: a daemon-wide service the daemon runs beside the server and stops
  in order at shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from pokeralphd.domain.inbox import Delivery, Feedback, Source
    from pokeralphd.protocol.events import Payload

AnswerCallback = Callable[["Delivery", "Feedback"], Awaitable[None]]


class EventSink(Protocol):
    """Publishes one event: a daemon-wide sequence number is assigned by the sink."""

    def publish(self, payload: Payload, repo: str | None, task_id: str | None = None) -> object:
        """Publish an event struct of :mod:`pokeralphd.protocol.events` (its type is the
        struct's)."""
        ...


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (for deadlines people read, like a rate-limit reset)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for timeouts and durations)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class Inbox(Protocol):
    """One repository's inbox, as battles and planning use it."""

    async def create(
        self,
        title: str,
        body: str,
        mode: str,
        schema: dict[str, Any] | None,
        source: Source | None = None,
        timeout_seconds: float | None = None,
        on_answer: AnswerCallback | None = None,
    ) -> Delivery: ...

    def on_answer(self, delivery_id: str, callback: AnswerCallback) -> None:
        """Call ``callback`` when ``delivery_id`` is answered (once)."""
        ...

    async def close(self, delivery_id: str, reason: str | None = None) -> Delivery: ...

    async def answer_of(self, delivery_id: str) -> tuple[Delivery, Feedback | None]:
        """The delivery and its answer, if it has one (say, given while the daemon
        that asked was stopping)."""
        ...

    async def record_outside_answer(
        self, delivery_id: str, values: dict[str, Any], note: str | None
    ) -> None:
        """The question was settled elsewhere (say, ``battle.approve``): store that answer."""
        ...


class Lifecycle(Protocol):
    """A daemon-wide service: ``run`` until cancelled (``started`` once ready), ``stop``
    to end its work in order before the daemon closes its clients."""

    async def run(self, *, task_status: TaskStatus[None]) -> None: ...

    async def stop(self) -> None: ...
