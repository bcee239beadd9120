"""Turning pydantic validation failures into precise ``InvalidParams`` errors."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pokeralph_core.documents import first_error
from pokeralphd.errors import InvalidParams

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any, what: str, prefix: str = "") -> M:
    """``model.model_validate(data)`` or :class:`InvalidParams` naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        name, message = first_error(exc, prefix)
        raise InvalidParams(f"invalid {what}: {name}: {message}", field=name) from exc
