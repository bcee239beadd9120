"""What the TUI shows, as plain data (no Textual, no I/O): the daemon stays the truth.

The board holds the last answers of ``battle.current``, ``inbox.list`` and ``daemon.status``
(reloaded whenever an event says they changed: see :func:`reloads`), the connection's state,
and each battle's recent output, kept from ``iteration_output`` events as ``(text, style)``
lines, at most :data:`OUTPUT_LINES` per battle and :data:`OUTPUT_BATTLES` battles.

A battle that ends leaves ``battle.current``; the board keeps it, with the status its last
event gave, so a person sees how it ended.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from pokeralphctl.commands.render import SHAPE_ERRORS, chunk_lines

#: A battle's key: (repository name, task id).
Key = tuple[str, str]

#: Lines of output kept per battle, and battles whose output is kept (the oldest go first).
OUTPUT_LINES = 2000
OUTPUT_BATTLES = 50

#: The final status each battle-ending event leaves.
ENDED = {
    "battle_complete": "completed",
    "battle_failed": "failed",
    "battle_cancelled": "cancelled",
}
BATTLE_EVENTS = frozenset(
    {
        "iteration_start",
        "iteration_end",
        "await_approval",
        "approval_received",
        "phase_changed",
        "escalation_resolved",
        "budget_exceeded",
        "merge_failed",
    }
)
INBOX_EVENTS = frozenset(
    {
        "new_delivery",
        "feedback_received",
        "delivery_closed",
        "delivery_timeout",
        "await_approval_delivery",
    }
)
SPEND_EVENTS = frozenset({"iteration_end", "verification_report", "review_report"})


def reloads(kind: str) -> bool:
    """Whether an event of this type changes what ``battle.current``, ``inbox.list`` or
    ``daemon.status`` (spend today) answer."""
    return (
        kind.startswith("battle")
        or kind in BATTLE_EVENTS
        or kind in INBOX_EVENTS
        or kind in SPEND_EVENTS
        or kind.startswith("repo_")
    )


class Board:
    """The dashboard's state; :meth:`apply` an event, :meth:`load` the daemon's answers."""

    def __init__(self) -> None:
        self.battles: dict[Key, dict[str, Any]] = {}
        self.inbox: list[dict[str, Any]] = []
        self.status: dict[str, Any] | None = None
        self.connected = False
        #: the connection's state in a line (why it is down, or what was lost)
        self.link_note = "connecting…"
        self.output: OrderedDict[Key, deque[tuple[str, str]]] = OrderedDict()

    # ---------------------------------------------------------------- the daemon's answers
    def load(
        self,
        status: dict[str, Any] | None,
        current: dict[str, Any] | None,
        inbox: dict[str, Any] | None,
    ) -> None:
        """Take what ``daemon.status``, ``battle.current`` and ``inbox.list`` answered
        (None: that call failed, keep what was there)."""
        if status is not None:
            self.status = status
        if current is not None:
            active = {(b["repo"], b["taskId"]): b for b in current["battles"]}
            for key, battle in self.battles.items():
                if key not in active and battle.get("status") not in ENDED.values():
                    battle["status"] = battle.get("status") or "ended"
                    battle["gone"] = True
            for key, battle in active.items():
                self.battles[key] = dict(battle)
        if inbox is not None:
            self.inbox = list(inbox["items"])

    # ---------------------------------------------------------------- events
    def apply(self, event: dict[str, Any]) -> tuple[Key, list[tuple[str, str]]] | None:
        """Take one event; the battle whose output grew and the lines it gained, if any.
        An event without the shape of its type (a newer or a broken daemon's) is left
        out: the board reloads from the daemon's answers anyway."""
        try:
            return self._apply(event)
        except SHAPE_ERRORS:
            return None

    def _apply(self, event: dict[str, Any]) -> tuple[Key, list[tuple[str, str]]] | None:
        kind: str = event["type"]
        repo, task = event["repo"], event.get("taskId")  # taskId: a task's events only
        if repo is None or task is None:
            return None
        key = (repo, task)
        if kind == "iteration_output":
            lines = chunk_lines(event["payload"]["chunks"], 0)
            if not lines:
                return None
            self._lines(key).extend(lines)
            return key, lines
        if kind == "iteration_start":
            line = (f"── iteration {event['payload']['iteration']} ──", "bold")
            self._lines(key).append(line)
            return key, [line]
        if kind in ENDED:
            battle = self.battles.setdefault(key, {"repo": repo, "taskId": task})
            battle["status"] = ENDED[kind]
            line = (f"── {ENDED[kind]} ──", "bold")
            self._lines(key).append(line)
            return key, [line]
        return None

    def _lines(self, key: Key) -> deque[tuple[str, str]]:
        lines = self.output.get(key)
        if lines is None:
            lines = self.output[key] = deque(maxlen=OUTPUT_LINES)
            while len(self.output) > OUTPUT_BATTLES:
                self.output.popitem(last=False)
        else:
            self.output.move_to_end(key)
        return lines

    # ---------------------------------------------------------------- reading
    def rows(self) -> list[dict[str, Any]]:
        """The battles in the order shown: active first, then by repository and task."""
        return sorted(
            self.battles.values(),
            key=lambda b: (
                bool(b.get("gone")) or b.get("status") in ENDED.values(),
                b["repo"],
                b["taskId"],
            ),
        )

    def open_items(self) -> int:
        return sum(1 for item in self.inbox if item["status"] in ("awaiting_feedback", "timeout"))

    def spend_today(self) -> dict[str, Any] | None:
        spend = (self.status or {}).get("spendToday")
        return spend if isinstance(spend, dict) else None
