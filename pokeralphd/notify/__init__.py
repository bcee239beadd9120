"""Channels that find a person when a battle needs them (issue 26).

The daemon-wide :class:`~pokeralphd.notify.service.NotifyService` subscribes to the
event bus in-process; what a person should hear of (:mod:`.notice`) is coalesced per
battle (:mod:`.coalesce`), composed into one message with a link to the item in the
dashboard (:mod:`.compose`, :mod:`.links`), and handed to each channel's outbox
(:mod:`.outbox`: rate-limited, retried with backoff, given up with ``notify_failed``).
Channels: the desktop (:mod:`.dbus` on Linux, :mod:`.macos`) and webhooks
(:mod:`.webhook`, in the formats of :mod:`.formats`).
"""
