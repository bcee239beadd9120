"""The base of every pydantic model of the domain: camelCase JSON, unknown keys rejected.

It imports nothing of the domain, so any module may build on it: the config models, the
approval rules they hold, and the local agent's settings (which the agent loads without
the rest of the models).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base: camelCase JSON, unknown keys rejected (a typo in a hand-edited file is named)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
        defer_build=True,
    )

    def dump(self) -> dict[str, Any]:
        """JSON-ready dict with camelCase keys."""
        return self.model_dump(mode="json", by_alias=True)
