"""Generate ``shared/``: the language-neutral contract for every client.

- ``shared/openrpc.json``: every method (what ``rpc.discover`` returns);
- ``shared/schemas/events/{type}.json``: each event's payload;
- ``shared/schemas/{document}.json``: the ``.pokeralph/`` documents.

Run ``python -m pokeralphd.protocol.contract [ROOT]`` after changing a method, an event or
a document; a test regenerates the files and fails on any drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pokeralphd.domain.inbox import AnnotationList, Delivery, FeedbackList, Index
from pokeralphd.domain.models import PRD, Battle, Config, Progress
from pokeralphd.planning.service import PlanningSession
from pokeralphd.protocol.events import EVENT_TYPES, Envelope
from pokeralphd.protocol.openrpc import openrpc_document
from pokeralphd.store.registry import Registry

if TYPE_CHECKING:
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


def render(table: Any) -> dict[str, str]:
    """Relative path -> file content, for the whole contract."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    files = {"openrpc.json": dump(openrpc_document(table))}
    for name, (model, where) in DOCUMENTS.items():
        files[f"schemas/{name}.json"] = dump(document_schema(model, where))
    for name, payload in EVENT_TYPES.items():
        files[f"schemas/events/{name}.json"] = dump(event_schema(name, payload))
    return files


def write(root: Path) -> list[Path]:
    from pokeralphd.server.methods import build_table

    written = []
    for rel, content in render(build_table()).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    return written


if __name__ == "__main__":
    target = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared"
    )
    for changed in write(target):
        print(f"wrote {changed}")
