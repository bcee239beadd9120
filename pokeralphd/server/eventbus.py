"""The event bus: daemon-wide sequence numbers, a bounded history, filtered subscribers.

``publish`` encodes an event once and hands it to each matching subscriber's outbox
without awaiting anything, so a slow subscriber never slows the daemon. A subscriber may
resume with ``since``: events still in history are replayed; if some were already
dropped, the subscription says how many.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pokeralphd.domain.timeutil import now_iso
from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.framing import Mode, encode_frame

if TYPE_CHECKING:
    from collections.abc import Callable

EVENT_METHOD = "event"


@dataclass(slots=True)
class Event:
    seq: int
    type: str
    repo: str | None
    task_id: str | None
    payload: dict[str, Any]
    timestamp: str
    _frames: dict[str, bytes] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "type": self.type,
            "repo": self.repo,
            "payload": self.payload,
            "timestamp": self.timestamp,
        }
        if self.task_id is not None:
            out["taskId"] = self.task_id
        return out

    def frame(self, mode: Mode | None) -> bytes:
        key = mode or "line"
        cached = self._frames.get(key)
        if cached is None:
            body = jsonrpc.encode(jsonrpc.notification(EVENT_METHOD, self.params()))
            cached = self._frames[key] = encode_frame(body, mode)
        return cached


@dataclass
class Subscription:
    id: int
    deliver: Callable[[Event], bool]  # returns False when the subscriber is gone
    repo: str | None = None
    types: frozenset[str] | None = None
    task_id: str | None = None

    def matches(self, event: Event) -> bool:
        return (
            (self.repo is None or event.repo == self.repo)
            and (self.types is None or event.type in self.types)
            and (self.task_id is None or event.task_id == self.task_id)
        )


def overflow_notice(mode: Mode | None, dropped_after: int) -> bytes:
    body = jsonrpc.encode(
        jsonrpc.notification(
            "events.overflow",
            {
                "code": int(ErrorCode.SUBSCRIBER_OVERFLOW),
                "message": "subscriber fell too far behind; disconnecting. "
                f"Reconnect and subscribe with since={dropped_after} to resume.",
                "lastSeq": dropped_after,
            },
        )
    )
    return encode_frame(body, mode)


class EventBus:
    def __init__(self, history: int = 10_000) -> None:
        self.seq = 0
        self.history: deque[Event] = deque(maxlen=history)
        self.subscriptions: dict[int, Subscription] = {}
        self._ids = itertools.count(1)

    def publish(
        self,
        type_: str,
        repo: str | None,
        payload: dict[str, Any],
        task_id: str | None = None,
    ) -> Event:
        self.seq += 1
        event = Event(self.seq, type_, repo, task_id, payload, now_iso())
        self.history.append(event)
        gone = []
        for sub in self.subscriptions.values():  # matches() inlined: this is the hot loop
            if (
                (sub.repo is None or sub.repo == repo)
                and (sub.types is None or type_ in sub.types)
                and (sub.task_id is None or sub.task_id == task_id)
                and not sub.deliver(event)
            ):
                gone.append(sub.id)
        for sub_id in gone:
            self.subscriptions.pop(sub_id, None)
        return event

    def subscribe(
        self,
        deliver: Callable[[Event], bool],
        repo: str | None = None,
        types: list[str] | None = None,
        task_id: str | None = None,
    ) -> Subscription:
        sub = Subscription(
            next(self._ids), deliver, repo, frozenset(types) if types else None, task_id
        )
        self.subscriptions[sub.id] = sub
        return sub

    def unsubscribe(self, sub_id: int) -> bool:
        return self.subscriptions.pop(sub_id, None) is not None

    def replay(self, sub: Subscription, since: int) -> tuple[list[Event], int]:
        """Events after ``since`` still in history for ``sub``, and how many were dropped."""
        oldest = self.history[0].seq if self.history else self.seq + 1
        lost = max(0, oldest - since - 1) if since < self.seq else 0
        events = [e for e in self.history if e.seq > since and sub.matches(e)]
        return events, lost
