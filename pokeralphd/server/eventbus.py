"""The event bus: daemon-wide sequence numbers, a bounded history, filtered subscribers.

``publish`` encodes an event once and hands it to each matching subscriber's outbox
without awaiting anything, so a slow subscriber never slows the daemon. A subscriber may
resume with ``since``: events still in history are replayed; if some were already
dropped, the subscription says how many.

The history is bounded twice, by count and by encoded bytes (what it costs to hold):
the oldest events go first when either is reached, even the newest one if it alone is
larger than the byte bound. An event keeps only its encoded form, not the payload
objects it was built from.
"""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from time import time_ns
from typing import TYPE_CHECKING, Any

from pokeralph_core.timeutil import iso
from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.events import EVENT_NAMES
from pokeralphd.protocol.framing import Mode, encode_frame

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from pokeralphd.protocol.events import Payload

    Route: TypeAlias = list[tuple[int, Callable[["Event"], bool], Callable[[bytes], bool] | None]]

EVENT_METHOD = "event"
MAX_ROUTES = 1024  # (type, repo, task) keys whose subscribers are remembered
DEFAULT_HISTORY = 10_000
DEFAULT_HISTORY_BYTES = 32 << 20


class Event:
    """One published event, held as its encoded ``event`` notification."""

    __slots__ = ("_lsp", "line", "repo", "seq", "task_id", "timestamp", "type")

    def __init__(
        self,
        seq: int,
        type_: str,
        repo: str | None,
        task_id: str | None,
        payload: Payload,
        timestamp: str,
    ) -> None:
        self.seq = seq
        self.type = type_
        self.repo = repo
        self.task_id = task_id
        self.timestamp = timestamp
        params: dict[str, Any] = {
            "seq": seq,
            "type": type_,
            "repo": repo,
            "payload": payload,
            "timestamp": timestamp,
        }
        if task_id is not None:
            params["taskId"] = task_id
        # Encoded once, at publish: the line frame (body + newline) is what most use.
        self.line = jsonrpc.encode({"jsonrpc": "2.0", "method": EVENT_METHOD, "params": params})
        self.line += b"\n"
        self._lsp: bytes | None = None

    @property
    def size(self) -> int:
        """Encoded bytes, what holding it in history costs."""
        return len(self.line)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = jsonrpc.decode(self.line[:-1])["params"]
        return params

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = self.params()["payload"]
        return payload

    def frame(self, mode: Mode | None) -> bytes:
        if mode != "lsp":
            return self.line
        if self._lsp is None:
            self._lsp = encode_frame(self.line[:-1], "lsp")
        return self._lsp


def _seq(event: Event) -> int:
    return event.seq


@dataclass
class Subscription:
    id: int
    deliver: Callable[[Event], bool]  # returns False when the subscriber is gone
    repo: str | None = None
    types: frozenset[str] | None = None
    task_id: str | None = None
    #: The subscriber's shortcut, if it has one (``deliver.put_line``): takes an event's
    #: line frame as is and says whether it was queued; if not, ``deliver`` runs (and
    #: deals with what follows, such as telling an overflowed subscriber).
    put_line: Callable[[bytes], bool] | None = None

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
    def __init__(
        self, history: int = DEFAULT_HISTORY, history_bytes: int = DEFAULT_HISTORY_BYTES
    ) -> None:
        self.seq = 0
        self.history: deque[Event] = deque()
        self.history_bytes = 0
        self.max_history = history
        self.max_history_bytes = history_bytes
        self.subscriptions: dict[int, Subscription] = {}
        self._ids = itertools.count(1)
        # Who gets an event of a (type, repo, task) key, in subscription order: worked out
        # once per key, not per event and subscriber; forgotten when subscriptions change.
        self._routes: dict[tuple[str, str | None, str | None], Route] = {}
        self._stamp_ms = -1
        self._stamp = ""

    def _trim(self) -> None:
        history = self.history
        while history and (
            len(history) > self.max_history or self.history_bytes > self.max_history_bytes
        ):
            self.history_bytes -= history.popleft().size

    @property
    def oldest_seq(self) -> int:
        """The seq of the oldest event still in history (the next one when it is empty)."""
        return self.history[0].seq if self.history else self.seq + 1

    def publish(self, payload: Payload, repo: str | None, task_id: str | None = None) -> Event:
        """Publish ``payload`` (an event struct: its type is the struct's) for ``repo``."""
        type_ = EVENT_NAMES[type(payload)]
        self.seq += 1
        event = Event(self.seq, type_, repo, task_id, payload, self._timestamp())
        self.history.append(event)
        self.history_bytes += event.size
        if self.history_bytes > self.max_history_bytes or len(self.history) > self.max_history:
            self._trim()
        key = (type_, repo, task_id)
        route = self._routes.get(key)
        if route is None:
            route = self._route(key)
        gone: list[int] = []
        line = event.line
        for sub_id, deliver, put_line in route:
            if put_line is not None and put_line(line):
                continue
            if not deliver(event):
                gone.append(sub_id)
        if gone:
            for sub_id in gone:
                self.subscriptions.pop(sub_id, None)
            self._routes.clear()
        return event

    def _timestamp(self) -> str:
        """What ``timeutil.now_iso()`` says, worked out once per millisecond (its
        resolution): formatting a datetime costs more than the rest of a publish, and
        events come by the thousand per millisecond in a burst."""
        ms = time_ns() // 1_000_000
        if ms != self._stamp_ms:
            moment = datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
            self._stamp_ms, self._stamp = ms, iso(moment)
        return self._stamp

    def _route(self, key: tuple[str, str | None, str | None]) -> Route:
        type_, repo, task_id = key
        if len(self._routes) >= MAX_ROUTES:
            self._routes.clear()  # many keys (task ids come and go): start again
        route = self._routes[key] = [
            (sub.id, sub.deliver, sub.put_line)
            for sub in self.subscriptions.values()
            if (sub.repo is None or sub.repo == repo)
            and (sub.types is None or type_ in sub.types)
            and (sub.task_id is None or sub.task_id == task_id)
        ]
        return route

    def subscribe(
        self,
        deliver: Callable[[Event], bool],
        repo: str | None = None,
        types: list[str] | None = None,
        task_id: str | None = None,
    ) -> Subscription:
        sub = Subscription(
            next(self._ids),
            deliver,
            repo,
            frozenset(types) if types else None,
            task_id,
            getattr(deliver, "put_line", None),
        )
        self.subscriptions[sub.id] = sub
        self._routes.clear()
        return sub

    def unsubscribe(self, sub_id: int) -> bool:
        if self.subscriptions.pop(sub_id, None) is None:
            return False
        self._routes.clear()
        return True

    def replay(
        self, sub: Subscription, since: int, max_bytes: int | None = None
    ) -> tuple[list[Event], int]:
        """Events after ``since`` still in history for ``sub``, and how many will not be
        replayed: dropped from history, and with ``max_bytes`` the oldest of those for
        ``sub`` past that many bytes (the newest are the ones sent)."""
        oldest = self.oldest_seq
        lost = max(0, oldest - since - 1) if since < self.seq else 0
        history = self.history  # in seq order: start after ``since`` without a scan
        start = bisect.bisect_right(history, since, key=_seq)
        events = [e for e in itertools.islice(history, start, None) if sub.matches(e)]
        if max_bytes is not None:
            size, keep = 0, len(events)
            while keep and size + events[keep - 1].size <= max_bytes:
                keep -= 1
                size += events[keep].size
            lost += keep
            del events[:keep]
        return events, lost
