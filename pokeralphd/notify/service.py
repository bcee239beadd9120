"""The notifier: a daemon-wide service that tells a person, on the channels they chose,
when a battle needs them or is done.

It subscribes to the event bus in-process, for the event types that may notify
(:data:`~pokeralphd.notify.notice.EVENT_KINDS`); the subscription only puts the event in
a bounded queue (past :attr:`Limits.inbound` waiting, an event is dropped and counted),
so publishing never waits on it. A task reads the queue, turns events into notices and
coalesces them per battle (:mod:`.coalesce`); when a battle's window closes, its notices
become one message per channel that wants them (the repository's effective
``notify`` config: the user's, made no louder by the repository's) and go to that
channel's outbox (:mod:`.outbox`). Sending is the outboxes' business, each in its own
task: the daemon's loop never waits on a webhook or the bus.

Everything it decides on is the daemon's clock (a :class:`~pokeralphd.ports.Clock`),
so tests move time instead of waiting.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from pokeralphd.clock import SYSTEM_CLOCK, wait_or_timeout
from pokeralphd.errors import InvalidParams
from pokeralphd.notify.channel import SendFailed
from pokeralphd.notify.coalesce import Coalescer
from pokeralphd.notify.compose import Message, compose
from pokeralphd.notify.notice import EVENT_KINDS, notice_of
from pokeralphd.notify.outbox import Limits, Outbox
from pokeralphd.notify.webhook import WebhookChannel
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.results import NotifyChannelResult, NotifyTestResult

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup, TaskStatus
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from pokeralph_core.config.model import NotifyConfig
    from pokeralphd.notify.channel import Channel
    from pokeralphd.ports import Clock

log = logging.getLogger(__name__)
OUTBOXES_MAX = 32


class BusEvent(Protocol):
    """What the notifier reads of a published event."""

    type: str
    repo: str | None
    task_id: str | None

    @property
    def payload(self) -> dict[str, Any]: ...


class EventSource(Protocol):
    """The event bus, as the notifier uses it: subscribe in-process, publish its own."""

    def subscribe(
        self,
        deliver: Callable[[Any], bool],
        repo: str | None = None,
        types: list[str] | None = None,
        task_id: str | None = None,
    ) -> Any: ...

    def unsubscribe(self, sub_id: int) -> bool: ...

    def publish(
        self, payload: ev.Payload, repo: str | None, task_id: str | None = None
    ) -> object: ...


def default_desktop() -> Channel | None:
    """This platform's desktop channel: D-Bus on Linux, osascript on macOS."""
    if sys.platform == "darwin":
        from pokeralphd.notify.macos import OsascriptChannel

        return OsascriptChannel()
    if sys.platform.startswith("linux"):
        from pokeralphd.notify.dbus import FreedesktopChannel

        return FreedesktopChannel()
    return None


class NotifyService:
    def __init__(
        self,
        bus: EventSource,
        config: Callable[[str | None], Awaitable[NotifyConfig]],
        base_url: Callable[[], str | None] = lambda: None,
        clock: Clock = SYSTEM_CLOCK,
        limits: Limits | None = None,
        desktop: Callable[[], Channel | None] = default_desktop,
    ) -> None:
        self.bus = bus
        self.config = config
        self.base_url = base_url
        self.clock = clock
        self.limits = limits or Limits()
        self.desktop = desktop
        self.coalescer = Coalescer(self.limits.window)
        self.outboxes: dict[str, tuple[Outbox, anyio.CancelScope]] = {}
        self.dropped = 0  # events the queue had no room for
        self.failed = 0  # messages given up on
        self._sub: int | None = None
        self._tg: TaskGroup | None = None
        self._changed = anyio.Event()
        self._send: MemoryObjectSendStream[BusEvent] | None = None

    # -- the subscription: never waits
    def _deliver(self, event: BusEvent) -> bool:
        assert self._send is not None
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        send, receive = anyio.create_memory_object_stream[BusEvent](self.limits.inbound)
        self._send = send
        self._sub = self.bus.subscribe(self._deliver, types=list(EVENT_KINDS)).id
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._read, receive)
                tg.start_soon(self._flush_loop)
                task_status.started()
        finally:
            self._unsubscribe()
            send.close()

    async def stop(self) -> None:
        """Stop listening and sending (notices still coalescing are not sent)."""
        self._unsubscribe()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def _unsubscribe(self) -> None:
        if self._sub is not None:
            self.bus.unsubscribe(self._sub)
            self._sub = None

    # -- reading and coalescing
    async def _read(self, receive: MemoryObjectReceiveStream[BusEvent]) -> None:
        async with receive:
            async for event in receive:
                notice = notice_of(event.type, event.repo, event.task_id, event.payload)
                if notice is not None:
                    self.coalescer.add(notice, self.clock.monotonic())
                    self._changed.set()

    async def _flush_loop(self) -> None:
        while True:
            changed = self._changed = anyio.Event()
            due = self.coalescer.next_due()
            if due is None:
                await changed.wait()
                continue
            now = self.clock.monotonic()
            if due > now:
                await wait_or_timeout(changed, self.clock, due - now)
                continue
            for notices in self.coalescer.take_due(now):
                await self._dispatch(notices)

    async def _dispatch(self, notices: list[Any]) -> None:
        repo = notices[0].repo
        try:
            config = await self.config(repo)
        except Exception as exc:  # a broken config must not stop the notifier
            log.warning("notifications of %s not sent: its config: %s", repo, exc)
            return
        base = self.base_url()
        for outbox, kinds in self._channels(config):
            kept = [n for n in notices if n.kind in kinds]
            if kept:
                outbox.put(compose(kept, base, config.include_details))

    # -- channels
    def _channels(self, config: NotifyConfig) -> list[tuple[Outbox, set[str]]]:
        """The outbox of each channel ``config`` turns on, and the kinds it sends."""
        out: list[tuple[Outbox, set[str]]] = []
        kinds: set[str] = set(config.events)
        if config.desktop:
            outbox = self._outbox("desktop", lambda: self.desktop())
            if outbox is not None:
                out.append((outbox, kinds))
        for index, hook in enumerate(config.webhooks):
            name = hook.name or f"webhook{index + 1}"
            # the URL is part of what the outbox is: another URL, another outbox (and
            # rate limit); the key keeps a digest of it, never the URL
            digest = hashlib.sha256(f"{hook.format} {hook.url}".encode()).hexdigest()[:16]
            outbox = self._outbox(
                f"{name}:{digest}", functools.partial(WebhookChannel, name, hook.format, hook.url)
            )
            if outbox is not None:
                wanted: set[str] = set(hook.events) if hook.events is not None else kinds
                out.append((outbox, kinds & wanted))
        return out

    def _outbox(self, key: str, make: Callable[[], Channel | None]) -> Outbox | None:
        held = self.outboxes.get(key)
        if held is not None:
            return held[0]
        channel = make()
        if channel is None:
            return None
        if len(self.outboxes) >= OUTBOXES_MAX:  # configs come and go: forget idle ones
            for old, (box, scope) in list(self.outboxes.items()):
                if not box.queue:
                    scope.cancel()
                    del self.outboxes[old]
        outbox = Outbox(channel, self.clock, self.limits, self.base_url, self._failed)
        scope = anyio.CancelScope()
        self.outboxes[key] = (outbox, scope)
        if self._tg is not None:
            self._tg.start_soon(self._run_outbox, outbox, scope)
        return outbox

    @staticmethod
    async def _run_outbox(outbox: Outbox, scope: anyio.CancelScope) -> None:
        with scope:
            await outbox.run()

    def _failed(self, channel: Channel, message: Message, attempts: int, reason: str) -> None:
        self.failed += 1
        log.warning(
            "notification to %s given up after %d attempts: %s", channel.name, attempts, reason
        )
        failed = ev.NotifyFailed(
            channel=channel.name,
            format=channel.kind,
            kinds=list(message.kinds),
            attempts=attempts,
            error=reason,
            delivery_id=message.delivery_id,
        )
        self.bus.publish(failed, message.repo, message.task_id)

    # -- notify.test
    async def test(self, name: str | None) -> NotifyTestResult:
        """Send one test notification on the channel ``name`` (all when ``None``), one
        attempt each, within their rate limits; what each said."""
        config = await self.config(None)
        channels = self._channels(config)
        names = [outbox.channel.name for outbox, _ in channels]
        if not channels:
            raise InvalidParams(
                "no notification channel is configured: set notify.desktop or "
                "notify.webhooks (`pokeralphctl config set --user …`)",
                field="channel",
            )
        if name is not None:
            channels = [(o, k) for o, k in channels if o.channel.name == name]
            if not channels:
                raise InvalidParams(
                    f"no channel {name!r}: the channels are {', '.join(names)}",
                    field="channel",
                    channels=names,
                )
        base = self.base_url()
        message = Message(
            title="pokeralph · test notification",
            body="Notifications from pokeralph reach you here.",
            link=base or None,
            kinds=(),
        )
        results: list[NotifyChannelResult] = []
        for outbox, _ in channels:
            channel = outbox.channel
            error: str | None = None
            try:
                await outbox.send_now(message)
            except SendFailed as exc:
                ok, error = False, exc.reason
            else:
                ok = True
            results.append(
                NotifyChannelResult(channel=channel.name, format=channel.kind, ok=ok, error=error)
            )
        return NotifyTestResult(results=results)
