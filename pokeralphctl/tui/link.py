"""The TUI's protocol adapter: the blocking reference client, made safe to run under a UI.

Standard library only (no Textual): the app runs :meth:`Link.listen` in a worker thread and
each :meth:`Link.call` in a short-lived one, and hands their results to its event loop.

- :meth:`Link.call` makes one request on a fresh connection (cheap on a Unix socket) with a
  deadline, so a slow ``battle.cancel`` never holds up the event stream.
- :meth:`Link.listen` keeps one subscription to every event, across repositories, for as
  long as its ``stop`` event is unset: it subscribes with an
  :class:`~pokeralphctl.client.EventCursor`, so after a dropped connection it resumes with
  ``since`` (or, when the daemon restarted, from the new daemon's start), and tells its
  :class:`Sink` each time it is connected (with how many events were lost) or cut off
  (with why). A daemon that is not there is a state, not an error: it retries with a
  backoff capped at :data:`RETRY_MAX` seconds until the daemon answers or it is stopped.
  The first subscription starts from ``since`` 0: the daemon replays the history it still
  holds (bounded by its event history limit), so the output of battles already running
  shows at once.

Bounded and cancellable: reads wake every :data:`POLL` seconds to look at ``stop``, so a
cancel ends the thread within that; the sink is called synchronously, so the reader never
gets ahead of the screen (the daemon bounds what it buffers for a slow subscriber and says
what it dropped, which :meth:`Sink.connected` passes on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pokeralphctl.client import ClientError, Connection, DaemonNotRunning, EventCursor

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping, Sequence

#: How long a read waits before it looks at ``stop`` again (seconds).
POLL = 0.25
#: The first and the longest wait between two attempts to reach the daemon (seconds).
RETRY_MIN, RETRY_MAX = 0.2, 2.0
#: How long one request may take (``battle.cancel`` waits up to a minute for the agent).
CALL_TIMEOUT = 120.0
#: How long subscribing may take before the attempt counts as failed.
SUBSCRIBE_TIMEOUT = 10.0


class Sink(Protocol):
    """Where :meth:`Link.listen` reports; called from the listening thread, one at a time."""

    def connected(self, result: dict[str, Any], restarted: bool) -> None:
        """Subscribed: the ``events.subscribe`` result (``lost``: events missed since the
        last one seen), and whether the daemon is another process than before."""

    def disconnected(self, reason: str) -> None:
        """Not connected (any more): why, in a line a person can act on."""

    def event(self, event: dict[str, Any]) -> None:
        """A new event (an ``event`` notification's params), in order, never twice."""


class Link:
    """The daemon behind ``socket``; calls and the event stream."""

    def __init__(self, socket_file: str, environ: Mapping[str, str] | None = None) -> None:
        self.socket = socket_file
        self.environ = environ

    def connect(self, timeout: float | None = CALL_TIMEOUT) -> Connection:
        return Connection(self.socket, timeout=timeout, environ=self.environ)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request on a fresh connection: its result, or the client's error."""
        with self.connect() as conn:
            return conn.call(method, params)

    def call_many(self, calls: Sequence[tuple[str, dict[str, Any] | None]]) -> list[Any]:
        """Several requests in one round trip; each answer a result or a ``RequestFailed``."""
        with self.connect() as conn:
            return conn.call_many(calls)

    def listen(self, stop: threading.Event, sink: Sink) -> None:
        """Follow every event until ``stop`` is set (see the module's docstring)."""
        cursor = EventCursor(seq=0)
        delay = RETRY_MIN
        while not stop.is_set():
            try:
                with self.connect(SUBSCRIBE_TIMEOUT) as conn:
                    result = conn.subscribe(cursor)
                    delay = RETRY_MIN
                    sink.connected(result, cursor.restarted)
                    conn.settimeout(POLL)
                    reason = self._read(conn, cursor, stop, sink)
            except DaemonNotRunning as exc:
                reason = str(exc).splitlines()[0]
            except (ClientError, OSError, ValueError) as exc:
                # a refused subscription, a reset, a line that is not JSON: reconnect
                reason = f"lost the connection to pokeralphd: {exc or type(exc).__name__}"
            if stop.is_set():
                return
            sink.disconnected(reason)
            stop.wait(delay)
            delay = min(delay * 2, RETRY_MAX)

    @staticmethod
    def _read(conn: Connection, cursor: EventCursor, stop: threading.Event, sink: Sink) -> str:
        """Hand events to ``sink`` until the daemon closes the connection or ``stop``."""
        while not stop.is_set():
            try:
                for message in conn.messages():
                    params = message.get("params")
                    if (
                        message.get("method") == "event"
                        and isinstance(params, dict)
                        and cursor.advance(params)
                    ):
                        sink.event(params)
                    if stop.is_set():
                        return "stopped"
                return "the daemon closed the connection"
            except TimeoutError:
                continue  # nothing to read: look at stop, then read on
        return "stopped"
