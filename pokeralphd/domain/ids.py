"""Identifiers: task ids ``NNN-slug`` and inbox ids ``{prefix}_{unix}_{seq}``.

Every id that reaches a path is checked here first: anything that does not match the
pattern (``../x``, ``001-A``, an empty string) is rejected before it touches the disk.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

TASK_ID_RE = re.compile(r"^\d{3}-[a-z0-9-]+$")
TASK_ID_MAX_LEN = 64
SLUG_MAX_LEN = 30
DELIVERY_ID_RE = re.compile(r"^d_\d{1,12}_\d{3,6}$")


class InvalidId(ValueError):
    """Raised when an id does not match its required pattern."""

    def __init__(self, kind: str, value: object, pattern: str) -> None:
        self.kind = kind
        self.value = value
        self.pattern = pattern
        super().__init__(f"invalid {kind} id {value!r}: must match {pattern}")


def slugify(title: str, max_len: int = SLUG_MAX_LEN) -> str:
    """Lowercase ASCII slug with single hyphens, at most ``max_len`` chars, never empty."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    if len(slug) > max_len:
        cut = slug[:max_len]
        # Prefer cutting at a word boundary when one is reasonably close to the end.
        if "-" in cut and cut.rfind("-") >= max_len // 2:
            cut = cut[: cut.rfind("-")]
        slug = cut.strip("-")
    return slug or "task"


def validate_task_id(value: object) -> str:
    """Return ``value`` if it is a well-formed task id, else raise :class:`InvalidId`."""
    if (
        not isinstance(value, str)
        or len(value) > TASK_ID_MAX_LEN
        or not TASK_ID_RE.fullmatch(value)
    ):
        raise InvalidId("task", value, TASK_ID_RE.pattern)
    return value


def next_task_id(title: str, existing: Iterable[str]) -> str:
    """The id for a new task: one more than the highest number in use, and the title's slug."""
    existing = list(existing)
    highest = 0
    for task_id in existing:
        match = re.match(r"^(\d{3,})-", task_id)
        if match:
            highest = max(highest, int(match.group(1)))
    number = highest + 1
    if number > 999:
        raise ValueError("a PRD holds at most 999 task ids (NNN is three digits)")
    return f"{number:03d}-{slugify(title)}"


def validate_delivery_id(value: object) -> str:
    if not isinstance(value, str) or not DELIVERY_ID_RE.fullmatch(value):
        raise InvalidId("delivery", value, DELIVERY_ID_RE.pattern)
    return value
