"""Which events a person hears of, and what each says: one :class:`Notice` per event.

Pure: the event's type and payload in, a notice (or ``None``) out. A notice carries a
short line and, apart, the details (an error, an inbox item's text) that go out only when
the user opted in (``notify.includeDetails``): titles and links, never code or diffs by
default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pokeralph_core.config.model import NotifyKind

#: The bus events that may notify, and the kind each is.
EVENT_KINDS: dict[str, NotifyKind] = {
    "new_delivery": "waiting",
    "battle_complete": "complete",
    "battle_failed": "failed",
    "battle_escalated": "escalated",
    "budget_exceeded": "budget",
    "battle_cancelled": "cancelled",
    "merge_failed": "merge_failed",
}
DETAILS_MAX = 1000  # characters of details a notice keeps


@dataclass(frozen=True)
class Notice:
    """One event a person may want to hear of."""

    kind: NotifyKind
    repo: str
    task_id: str | None
    delivery_id: str | None
    line: str
    details: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What notices coalesce by: the battle, else the inbox item."""
        return (self.repo, f"task:{self.task_id}" if self.task_id else f"item:{self.delivery_id}")


def _iterations(n: Any) -> str:
    return f"{n} iteration" + ("" if n == 1 else "s")


def _details(text: Any) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    kept = str(text).strip()
    return kept if len(kept) <= DETAILS_MAX else kept[: DETAILS_MAX - 1] + "…"


def notice_of(
    type_: str, repo: str | None, task_id: str | None, payload: dict[str, Any]
) -> Notice | None:
    """The notice of one event, or ``None`` (not a kind that notifies, or an inbox item
    that waits for no answer)."""
    kind = EVENT_KINDS.get(type_)
    if kind is None or repo is None:
        return None
    task = task_id or payload.get("taskId")
    if kind == "waiting":
        delivery = payload.get("delivery") or {}
        if delivery.get("mode") == "passive" or delivery.get("status") != "awaiting_feedback":
            return None
        source = delivery.get("source") or {}
        content = delivery.get("content") or {}
        return Notice(
            kind,
            repo,
            source.get("taskId") or task,
            str(delivery.get("id")),
            f"waiting for you: {delivery.get('title')}",
            _details(content.get("body")),
        )
    if kind == "complete":
        cost = payload.get("costUsd") or 0
        spent = f" (${cost:.2f})" if isinstance(cost, int | float) and cost > 0 else ""
        line = f"complete after {_iterations(payload.get('iterations'))}{spent}"
        return Notice(kind, repo, task, None, line)
    if kind == "failed":
        line = f"failed after {_iterations(payload.get('iterations'))}"
        return Notice(kind, repo, task, None, line, _details(payload.get("error")))
    if kind == "escalated":
        escalation = payload.get("escalation") or {}
        reason = escalation.get("reason")
        line = f"escalated ({reason}): a person decides" if reason else "escalated"
        return Notice(
            kind,
            repo,
            task,
            escalation.get("deliveryId"),
            line,
            _details(escalation.get("message")),
        )
    if kind == "budget":
        limit = payload.get("limitUsd")
        cap = payload.get("cap")
        line = f"paused: over the {cap} budget (${limit})"
        return Notice(kind, repo, task, None, line, _details(payload.get("reason")))
    if kind == "cancelled":
        line = f"cancelled after {_iterations(payload.get('iterations'))}"
        return Notice(kind, repo, task, None, line)
    line = f"merge of {payload.get('branch')} into {payload.get('into')} refused"
    return Notice(kind, repo, task, None, line, _details(payload.get("message")))
