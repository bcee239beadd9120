"""The errors the shared code raises, each with a stable code and a ``data`` dict: the
base of every error a client may see (the daemon's own are in :mod:`pokeralphd.errors`,
built on this base), the three a shared document or file write may raise, and the one a
change to the config asked for (:mod:`.config.layers`) may raise.

::

    PokeralphError                 any error a client may see, with .code and .data
    ├── InvalidParams              a param is missing, of the wrong type, or out of range
    ├── VersionConflict            expectedVersion is stale
    ├── CorruptFile                a document on disk does not parse or validate
    └── StorageError               a write failed (ENOSPC, EACCES); nothing changed
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pokeralph_core.codes import ErrorCode


class PokeralphError(Exception):
    """Base of every error that becomes a JSON-RPC error response."""

    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = {k: v for k, v in data.items() if v is not None}


class InvalidParams(PokeralphError):
    """Raised when a method's params fail validation; ``data.field`` names the field."""

    code = ErrorCode.INVALID_PARAMS


class VersionConflict(PokeralphError):
    """Raised when an update names an expected version that is no longer current."""

    code = ErrorCode.VERSION_CONFLICT

    def __init__(self, file: Path | str, expected: int, actual: int) -> None:
        super().__init__(
            f"{Path(file).name} is at version {actual}, not {expected}: reload and retry",
            file=str(file),
            expected=expected,
            actual=actual,
        )


class CorruptFile(PokeralphError):
    """Raised when a document on disk cannot be used; the file is never overwritten."""

    code = ErrorCode.CORRUPT_FILE

    def __init__(self, file: Path | str, reason: str, field: str | None = None) -> None:
        where = f" (field {field})" if field else ""
        super().__init__(
            f"{file}{where}: {reason}; fix or remove the file by hand",
            file=str(file),
            field=field,
            reason=reason,
        )


class StorageError(PokeralphError):
    code = ErrorCode.STORAGE_ERROR
