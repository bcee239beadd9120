"""Coalescing per battle: the notices of one battle (or inbox item) that come within a
window go out as one message.

A key's window opens with its first notice and closes :attr:`Coalescer.window` seconds
later on the daemon's clock; whatever came meanwhile is in the batch. Bounded: a batch
keeps its first :data:`BATCH_MAX` notices (and counts the rest), and at most
:data:`KEYS_MAX` keys wait at once (a new one past that closes the oldest early).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralphd.notify.notice import Notice

BATCH_MAX = 32
KEYS_MAX = 256


@dataclass
class Batch:
    due: float
    notices: list[Notice] = field(default_factory=list)
    dropped: int = 0


class Coalescer:
    def __init__(self, window: float) -> None:
        self.window = window
        self.pending: dict[tuple[str, str], Batch] = {}

    def add(self, notice: Notice, now: float) -> None:
        batch = self.pending.get(notice.key)
        if batch is None:
            if len(self.pending) >= KEYS_MAX:
                oldest = min(self.pending.values(), key=lambda b: b.due)
                oldest.due = now
            batch = self.pending[notice.key] = Batch(now + self.window)
        if len(batch.notices) < BATCH_MAX:
            batch.notices.append(notice)
        else:
            batch.dropped += 1

    def next_due(self) -> float | None:
        return min((b.due for b in self.pending.values()), default=None)

    def take_due(self, now: float) -> list[list[Notice]]:
        """The batches whose window closed, oldest first; forgotten here."""
        due = sorted(
            ((key, b) for key, b in self.pending.items() if b.due <= now), key=lambda kb: kb[1].due
        )
        for key, _ in due:
            del self.pending[key]
        return [b.notices for _, b in due]
