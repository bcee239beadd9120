"""Layered configuration: built-in defaults, then the user's file, then the repository's.

The user layer lives at ``{user config dir}/pokeralph/config.json`` and the repository
layer at ``.pokeralph/config.json``; each holds only the keys it sets (``agent`` and
``feedbackCommands`` merge key by key). A layer that makes the result invalid is named
in the error, with the field.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pokeralphd.domain.models import Config
from pokeralphd.errors import CorruptFile, InvalidParams, VersionConflict
from pokeralphd.store.atomic import atomic_write
from pokeralphd.store.documents import META_KEYS, first_error, read_json

if TYPE_CHECKING:
    from pathlib import Path

CONFIG_SCHEMA_VERSION = 1
NESTED = ("agent", "feedbackCommands")


def merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """``layer`` over ``base``; nested objects merge one level deep, ``None`` unsets."""
    out = dict(base)
    for key, value in layer.items():
        if value is None:
            out.pop(key, None)
        elif key in NESTED and isinstance(value, dict) and isinstance(out.get(key), dict):
            inner = dict(out[key])
            for k, v in value.items():
                if v is None:
                    inner.pop(k, None)
                else:
                    inner[k] = v
            out[key] = inner
        else:
            out[key] = value
    return out


def default_layer() -> dict[str, Any]:
    return Config().dump()


def read_layer(path: Path) -> tuple[dict[str, Any], int]:
    """A layer's keys (without ``schemaVersion``/``version``) and its version; {} if absent."""
    if not path.exists():
        return {}, 0
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise CorruptFile(path, f"expected a JSON object, found {type(raw).__name__}")
    schema = raw.get("schemaVersion", 1)
    if isinstance(schema, int) and schema > CONFIG_SCHEMA_VERSION:
        raise CorruptFile(path, f"schemaVersion {schema} is newer than supported", "schemaVersion")
    version = raw.get("version", 0)
    return {k: v for k, v in raw.items() if k not in META_KEYS}, (
        version if isinstance(version, int) else 0
    )


def validate(data: dict[str, Any], source: Path | None) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        name, message = first_error(exc)
        if source is None:
            raise InvalidParams(f"config field {name}: {message}", field=name) from exc
        raise CorruptFile(source, message, name) from exc


def effective(user_file: Path | None, repo_file: Path | None) -> tuple[Config, dict[str, str]]:
    """The effective config and, for each top-level key, which layer set it."""
    data = default_layer()
    sources = dict.fromkeys(data, "default")
    for name, path in (("user", user_file), ("repo", repo_file)):
        if path is None:
            continue
        layer, _ = read_layer(path)
        data = merge(data, layer)
        validate(data, path)
        for key in layer:
            sources[key] = name
    return validate(data, None), sources


def write_layer(path: Path, layer: dict[str, Any], expected_version: int | None) -> int:
    _, on_disk = read_layer(path)
    if expected_version is not None and expected_version != on_disk:
        raise VersionConflict(path, expected_version, on_disk)
    version = on_disk + 1
    doc = {"schemaVersion": CONFIG_SCHEMA_VERSION, "version": version, **layer}
    atomic_write(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())
    return version
