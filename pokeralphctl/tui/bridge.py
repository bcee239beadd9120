"""From the blocking client's threads to Textual's event loop, without ever blocking for good.

A worker thread hands work to the app as a :class:`Call` message (``post_message`` is
thread-safe and never waits), not with ``App.call_from_thread``, which waits on a future
that nobody resolves if the app stops in between: a thread stuck there would hold up the
interpreter's exit.

:class:`StreamBridge` is the :class:`~pokeralphctl.tui.link.Sink` of the event stream's
thread. It keeps at most :data:`IN_FLIGHT` reports posted and not yet handled: past that the
reader waits (the daemon then buffers, within its own bound, and says what it dropped), and
while it waits it looks at ``stop`` every :data:`~pokeralphctl.tui.link.POLL` seconds, so a
cancel still ends it at once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from textual.message import Message

from pokeralphctl.tui.link import POLL

if TYPE_CHECKING:
    from collections.abc import Callable

    from textual.message_pump import MessagePump

#: Stream reports posted to the app and not yet handled, at most.
IN_FLIGHT = 256


class Call(Message):
    """Run ``callback(*args)`` on the app's loop; then ``done`` (if any) from there.

    Handled by the node it is posted to (its ``@on(Call)`` handler calls :meth:`run`),
    never bubbling on to run twice."""

    bubble = False

    def __init__(
        self,
        callback: Callable[..., Any],
        *args: Any,
        done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.callback = callback
        self.args = args
        self.done = done

    def run(self) -> None:
        try:
            self.callback(*self.args)
        finally:
            self.drop()

    def drop(self) -> None:
        """Not run (the app is closing), but counted as handled."""
        if self.done is not None:
            self.done()


def post(node: MessagePump, callback: Callable[..., Any], *args: Any) -> bool:
    """Have ``node`` (the app, a screen) run ``callback(*args)`` soon, from any thread;
    False if it is closing."""
    return bool(node.post_message(Call(callback, *args)))


class StreamBridge:
    """The event stream's sink: each report becomes a :class:`Call` to the app's handlers."""

    def __init__(self, app: Any, stop: threading.Event, room: int = IN_FLIGHT) -> None:
        self.app = app
        self.stop = stop
        self._room = threading.BoundedSemaphore(room)

    def _post(self, callback: Callable[..., Any], *args: Any) -> None:
        while not self._room.acquire(timeout=POLL):
            if self.stop.is_set():
                return
        if not self.app.post_message(Call(callback, *args, done=self._room.release)):
            self._room.release()
            self.stop.set()  # the app is closing: so is the stream

    def connected(self, result: dict[str, Any], restarted: bool) -> None:
        self._post(self.app.on_link_connected, result, restarted)

    def disconnected(self, reason: str) -> None:
        self._post(self.app.on_link_lost, reason)

    def event(self, event: dict[str, Any]) -> None:
        self._post(self.app.on_daemon_event, event)
