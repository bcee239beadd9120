"""One message from the notices of one battle (or inbox item): what every channel sends.

Pure. The title names the repository, the battle and the most pressing kind; the body is
a line per notice (at most :data:`LINES_MAX`); the link goes to the item that waits for
an answer if one does, else to the battle. Details go in only when the user opted in.
Several messages held back by a channel's rate limit fold into one digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pokeralphd.notify.links import item_link

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pokeralphd.notify.notice import Notice

#: Most pressing first: the kind a message is titled by.
PRIORITY = ("waiting", "escalated", "budget", "failed", "merge_failed", "complete", "cancelled")
URGENT = frozenset({"waiting", "escalated", "budget", "failed", "merge_failed"})
HEADLINES = {
    "waiting": "needs you",
    "escalated": "escalated",
    "budget": "over budget",
    "failed": "failed",
    "merge_failed": "merge refused",
    "complete": "complete",
    "cancelled": "cancelled",
}
LINES_MAX = 8
TITLE_MAX = 200


@dataclass(frozen=True)
class Message:
    """What a channel sends: a title, a few lines, a link to the item, the kinds."""

    title: str
    body: str
    link: str | None
    kinds: tuple[str, ...]
    repo: str | None = None
    task_id: str | None = None
    delivery_id: str | None = None
    details: str | None = None
    count: int = 1  # events folded in
    lines: tuple[str, ...] = field(default=())

    @property
    def urgent(self) -> bool:
        return any(kind in URGENT for kind in self.kinds)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _body(lines: Sequence[str]) -> str:
    shown = list(lines[:LINES_MAX])
    if len(lines) > LINES_MAX:
        shown.append(f"and {len(lines) - LINES_MAX} more")
    return "\n".join(shown)


def compose(notices: Sequence[Notice], base: str | None, include_details: bool) -> Message:
    """The message of ``notices`` (one battle's or one item's, oldest first)."""
    first = notices[0]
    kinds = tuple(k for k in PRIORITY if any(n.kind == k for n in notices))
    task_id = next((n.task_id for n in notices if n.task_id), None)
    waiting = [n for n in notices if n.kind in ("waiting", "escalated") and n.delivery_id]
    delivery_id = waiting[-1].delivery_id if waiting else None
    subject = task_id or (f"inbox item {first.delivery_id}" if first.delivery_id else "")
    title = _clip(f"pokeralph · {first.repo} · {subject}: {HEADLINES[kinds[0]]}", TITLE_MAX)
    lines = tuple(n.line for n in notices)
    details = None
    if include_details:
        details = "\n\n".join(n.details for n in notices if n.details) or None
    return Message(
        title=title,
        body=_body(lines),
        link=item_link(base, first.repo, task_id, delivery_id),
        kinds=kinds,
        repo=first.repo,
        task_id=task_id,
        delivery_id=delivery_id,
        details=details,
        count=len(notices),
        lines=lines,
    )


def digest(messages: Sequence[Message], base: str | None) -> Message:
    """One message for several a channel held back (its rate limit): their titles, and
    a link to the inbox (or the one item when they are all about one)."""
    if len(messages) == 1:
        return messages[0]
    kinds = tuple(k for k in PRIORITY if any(k in m.kinds for m in messages))
    repos = {m.repo for m in messages}
    repo = next(iter(repos)) if len(repos) == 1 else None
    lines = tuple(m.title.removeprefix("pokeralph · ") for m in messages)
    link = None
    if base:
        view = "inbox" if {"waiting", "escalated"} & set(kinds) else "dashboard"
        link = (base if base.endswith("/") else base + "/") + f"#/{view}"
    return Message(
        title=f"pokeralph: {len(messages)} notifications",
        body=_body(lines),
        link=link,
        kinds=kinds,
        repo=repo,
        count=sum(m.count for m in messages),
        lines=lines,
    )
