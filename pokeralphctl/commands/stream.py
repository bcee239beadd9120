"""A subscription to the daemon's event stream that survives disconnects and restarts.

:class:`EventStream` subscribes with the given filters, yields each event's params, and
when the connection drops (the daemon restarted, or it cut off a slow subscriber) it
reconnects by itself: it polls the socket with a growing delay and no deadline, tells the
user once, and subscribes again with ``since`` = the last sequence number it saw, so the
daemon replays what was missed and reports how many events it no longer had.

Sequence numbers belong to one daemon process: a restarted daemon counts from 1 again.
The stream's :class:`~pokeralphctl.client.EventCursor` notices a restart by the daemon's
epoch, and the stream then says so and replays the new daemon's history from the start.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from pokeralphctl import codes
from pokeralphctl.client import RESTARTED, DaemonNotRunning, EventCursor, RequestFailed
from pokeralphctl.commands.render import shorten
from pokeralphctl.output import dumps

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pokeralphctl.client import Connection
    from pokeralphctl.commands import Context

ATTACH_TIMEOUT = 30.0
MAX_DELAY = 2.0


class EventStream:
    """Events matching the filters, in order, across reconnects; iterate :meth:`events`."""

    def __init__(
        self,
        ctx: Context,
        *,
        repo: str | None = None,
        task_id: str | None = None,
        types: list[str] | None = None,
        since: int | None = None,
        all_if_unregistered: bool = False,
    ) -> None:
        self.ctx = ctx
        self.repo = repo
        self.task_id = task_id
        self.types = types
        #: where the stream stands: the daemon's epoch and the last sequence number seen
        self.cursor = EventCursor(since)
        self.all_if_unregistered = all_if_unregistered
        self.conn: Connection | None = None
        self.pending: deque[dict[str, Any]] = deque()
        self.result: dict[str, Any] = {}

    # -- connecting
    def open(self) -> dict[str, Any]:
        """Connect and subscribe; errors (daemon not running, unknown repo) propagate."""
        conn = self.ctx.connect(ATTACH_TIMEOUT)
        try:
            self._attach(conn, first=True)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return self.result

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _attach(self, conn: Connection, first: bool) -> None:
        conn.on_event = self._early
        try:
            result = conn.subscribe(
                self.cursor, repo=self.repo, types=self.types, task_id=self.task_id
            )
        except RequestFailed as exc:
            if not (exc.code == codes.REPO_NOT_FOUND and self.all_if_unregistered and self.repo):
                raise
            self.ctx.out.note("not in a registered repository: watching all of them", "dim")
            self.repo = None
            result = conn.subscribe(self.cursor, types=self.types, task_id=self.task_id)
        self.all_if_unregistered = False
        if self.cursor.restarted:
            self.ctx.out.note(RESTARTED, "yellow")
        lost = result.get("lost") or 0
        if lost:
            when = "while disconnected" if not first else "before you subscribed"
            self.ctx.out.note(
                f"warning: {lost} events were lost {when} (the daemon no longer had them)",
                "yellow",
            )
        self.result = result
        conn.on_event = None
        conn.settimeout(None)

    def _early(self, message: dict[str, Any]) -> None:
        """An event that arrived before the subscribe reply: keep it for :meth:`events`."""
        self.pending.append(message)

    def _reconnect(self) -> None:
        """Poll the socket until a daemon answers and takes the subscription again."""
        self.ctx.out.note("lost the connection to pokeralphd; reconnecting (Ctrl-C stops)", "dim")
        delay = 0.05
        while True:
            try:
                conn = self.ctx.connect(ATTACH_TIMEOUT)
            except DaemonNotRunning:
                time.sleep(delay)
                delay = min(delay * 2, MAX_DELAY)
                continue
            try:
                self._attach(conn, first=False)
            except RequestFailed as exc:
                conn.close()
                if exc.code != codes.SHUTTING_DOWN:
                    raise
            except (OSError, ValueError):  # it went away again, mid-call
                conn.close()
            else:
                self.conn = conn
                self.ctx.out.note("reconnected to pokeralphd", "dim")
                return
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)

    # -- reading
    def _accept(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = message.get("method")
        if method == "events.overflow":
            notice = message.get("params") or {}
            self.ctx.out.note(f"warning: {notice.get('message', 'events overflowed')}", "yellow")
            return None
        if method != "event":
            return None
        params = message.get("params")
        if not (
            isinstance(params, dict)
            and isinstance(params.get("type"), str)
            and isinstance(params.get("payload"), dict)
        ):  # not an event's envelope: what follows may index its type and payload
            self.ctx.out.note(f"warning: not an event: {shorten(dumps(params))}", "yellow")
            return None
        if not self.cursor.advance(params):
            return None  # already seen (a replay overlapping what we had)
        return params

    def events(self) -> Iterator[dict[str, Any]]:
        """Every matching event's params, reconnecting as needed; ends only when closed."""
        if self.conn is None:
            self.open()
        while True:
            while self.pending:
                event = self._accept(self.pending.popleft())
                if event is not None:
                    yield event
            conn = self.conn
            if conn is None:
                return
            try:
                for message in conn.messages():
                    event = self._accept(message)
                    if event is not None:
                        yield event
            except (OSError, ValueError):  # reset by a dying daemon, or a torn last line
                pass
            if self.conn is None:  # closed by the consumer
                return
            conn.close()
            self._reconnect()
