"""Identifiers: task ids ``NNN-slug`` and inbox ids ``{prefix}_{unix}_{seq}``.

Every id that reaches a path is checked here first: anything that does not match the
pattern (``../x``, ``001-A``, an empty string) is rejected before it touches the disk.
Digits are ASCII ``[0-9]`` only: ``\\d`` would also take Arabic-Indic or full-width digits,
which ``int()`` reads but no person or file listing sorts as numbers.

The task number: seed 000 says ``{NNN}-{slug}``, "NNN is zero-padded (001, 002, ...)",
pattern ``\\d{3}-[a-z0-9-]+``. Zero-padding to three digits leaves room to count on, so
task 1000 is ``1000-slug``: three digits (``000`` to ``999``) or four and more without a
leading zero (no ``0001-x`` beside ``001-x``), the whole id at most 64 characters. A PRD
therefore never runs out of numbers after 999; the seed pattern, read as "contains", takes
these ids too. One pattern serves every check (the PRD model, the battle folders, the
params on the wire).
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

TASK_ID_PATTERN = r"^(?:[0-9]{3}|[1-9][0-9]{3,})-[a-z0-9-]+$"
TASK_ID_RE = re.compile(TASK_ID_PATTERN, re.ASCII)
TASK_ID_MAX_LEN = 64
SLUG_MAX_LEN = 30
DELIVERY_ID_PATTERN = r"^d_[0-9]{1,12}_[0-9]{3,6}$"
DELIVERY_ID_RE = re.compile(DELIVERY_ID_PATTERN, re.ASCII)
DELIVERY_ID_MAX_LEN = 21  # d_ + 12 digits + _ + 6 digits
_TASK_NUMBER_RE = re.compile(r"^([0-9]{3,})-", re.ASCII)


def wire_pattern(pattern: str) -> str:
    """``pattern`` for a check by *search* (msgspec, JSON Schema), not by full match.

    A ``$`` at the end also matches before a final newline in Python (``"001-x\\n"``);
    the lookahead refuses that, and JavaScript (whose ``$`` never does) reads it the same.
    """
    assert pattern.startswith("^") and pattern.endswith("$")
    return pattern + "(?!\\n)"


class InvalidId(ValueError):
    """Raised when an id does not match its required pattern.

    ``field`` names the param that held it when the raiser knows better than
    ``{kind}Id`` (what the dispatcher names otherwise).
    """

    def __init__(
        self, kind: str, value: object, pattern: str, field: str | None = None, why: str = ""
    ) -> None:
        self.kind = kind
        self.value = value
        self.pattern = pattern
        self.field = field
        super().__init__(why or f"invalid {kind} id {value!r}: must match {pattern}")


class TaskNumbersExhausted(InvalidId):
    """No task number is left: the next one would not fit in a task id's 64 characters."""

    def __init__(self, highest: int) -> None:
        super().__init__(
            "task",
            None,
            TASK_ID_PATTERN,
            field="id",
            why=(
                f"no task number is left after {highest} (a task id holds at most "
                f"{TASK_ID_MAX_LEN} characters): give the task an id of your own"
            ),
        )


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
    return slug or "task"[:max_len]


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
    """The id for a new task: one more than the highest number in use, and the title's slug.

    Past 999 the number simply grows (``1000-slug``, see the module docstring); the slug is
    shortened when a long number leaves less room in the id's 64 characters.
    """
    highest = 0
    for task_id in existing:
        match = _TASK_NUMBER_RE.match(task_id)
        if match:
            highest = max(highest, int(match.group(1)))
    number = f"{highest + 1:03d}"
    room = TASK_ID_MAX_LEN - len(number) - 1
    if room < 1:
        raise TaskNumbersExhausted(highest)
    return f"{number}-{slugify(title, min(SLUG_MAX_LEN, room))}"


def validate_delivery_id(value: object) -> str:
    if not isinstance(value, str) or not DELIVERY_ID_RE.fullmatch(value):
        raise InvalidId("delivery", value, DELIVERY_ID_RE.pattern)
    return value
