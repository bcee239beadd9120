"""Timestamps: timezone-aware UTC, written as ISO 8601 with milliseconds and ``Z``;
:data:`Timestamp` is the field type every document uses for them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer


def utcnow() -> datetime:
    """Now, to the millisecond (what the files keep, so a round trip is exact)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def iso(moment: datetime) -> str:
    """``2026-11-23T03:04:05.123Z``; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_or_none(moment: datetime | None) -> str | None:
    """:func:`iso`, or None for no time (an optional field on the wire)."""
    return None if moment is None else iso(moment)


def now_iso() -> str:
    return iso(utcnow())


def aware(moment: datetime) -> datetime:
    """``moment``, if it says its timezone (a naive time in a file is an error)."""
    if moment.tzinfo is None:
        raise ValueError("timestamp must include a timezone (use Z for UTC)")
    return moment


Timestamp = Annotated[
    datetime, AfterValidator(aware), PlainSerializer(iso, return_type=str, when_used="json")
]
