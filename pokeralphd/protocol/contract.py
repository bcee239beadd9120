"""Generate ``shared/``: the language-neutral contract for every client.

- ``shared/openrpc.json``: every method (what ``rpc.discover`` returns);
- ``shared/schemas/events/{type}.json``: each event's payload;
- ``shared/schemas/{document}.json``: the ``.pokeralph/`` documents.

Run ``python -m pokeralphd.contract [ROOT]`` after changing a method, an event or
a document; a test regenerates the files and fails on any drift.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from pokeralphd.domain.inbox import AnnotationList, Delivery, FeedbackList, Index
from pokeralphd.domain.models import PRD, Battle, Config, Progress
from pokeralphd.domain.planning import PlanningSession
from pokeralphd.domain.registry import Registry
from pokeralphd.protocol.events import EVENT_TYPES, Envelope
from pokeralphd.protocol.openrpc import MethodSpec, openrpc_document

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pydantic import BaseModel

DOCUMENTS: dict[str, tuple[type[BaseModel], str]] = {
    "config": (Config, ".pokeralph/config.json (each layer holds a subset of these keys)"),
    "prd": (PRD, ".pokeralph/prd.json"),
    "history": (Battle, ".pokeralph/battles/{taskId}/history.json"),
    "progress": (Progress, ".pokeralph/battles/{taskId}/progress.json"),
    "registry": (Registry, "$XDG_STATE_HOME/pokeralph/registry.json"),
    "inbox-index": (Index, ".pokeralph/inbox/index.json"),
    "delivery": (Delivery, ".pokeralph/inbox/deliveries/{id}/delivery.json"),
    "feedback": (FeedbackList, ".pokeralph/inbox/deliveries/{id}/feedback.json"),
    "annotations": (AnnotationList, ".pokeralph/inbox/deliveries/{id}/annotations.json"),
    "planning-session": (PlanningSession, ".pokeralph/planning/session.json"),
}


def document_schema(model: type[BaseModel], where: str) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    schema["title"] = where
    props = schema.setdefault("properties", {})
    props["schemaVersion"] = {"type": "integer", "minimum": 1, "description": "shape of the file"}
    props["version"] = {"type": "integer", "minimum": 0, "description": "bumped by every write"}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def event_schema(name: str, payload: type[msgspec.Struct]) -> dict[str, Any]:
    (_envelope, body), components = msgspec.json.schema_components(
        [Envelope, payload], ref_template="#/$defs/{name}"
    )
    schema = dict(components[Envelope.__name__])
    schema["properties"] = dict(schema["properties"])
    schema["properties"]["type"] = {"const": name}
    schema["properties"]["payload"] = body
    schema["$defs"] = {k: v for k, v in components.items() if k != Envelope.__name__}
    schema["title"] = f"event {name}"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def render(methods: Iterable[MethodSpec]) -> dict[str, str]:
    """Relative path -> file content, for the whole contract."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    files = {"openrpc.json": dump(openrpc_document(methods))}
    for name, (model, where) in DOCUMENTS.items():
        files[f"schemas/{name}.json"] = dump(document_schema(model, where))
    for name, payload in EVENT_TYPES.items():
        files[f"schemas/events/{name}.json"] = dump(event_schema(name, payload))
    return files
