"""What a channel is: a name, a kind, and ``send`` (one attempt, bounded in time).

``send`` raises :class:`SendFailed` with a reason a person may read and a log may keep:
it never names a webhook's URL (the caller retries, then gives up with ``notify_failed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pokeralphd.notify.compose import Message

SEND_TIMEOUT = 10.0  # seconds one attempt may take


class SendFailed(Exception):
    """Raised when a channel could not deliver a message (a refusal, an error status, no
    answer in time). ``retry`` is False when trying again cannot help."""

    def __init__(self, reason: str, retry: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


class Channel(Protocol):
    name: str
    kind: str  # "desktop" or a webhook format

    async def send(self, message: Message) -> None: ...
