"""The OpenRPC document of the daemon's methods, generated from the method table.

Each method's params and result schemas come from its msgspec types
(``msgspec.json.schema_components``); the documents results carry refer to their
pydantic-generated schemas. ``rpc.discover`` returns this document and
``shared/openrpc.json`` is the same, so the contract can never drift from the code
without a test noticing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from pokeralphd import __version__
from pokeralphd.protocol.codes import ERROR_DESCRIPTIONS
from pokeralphd.protocol.results import REF, model_components

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pokeralphd.protocol.params import Params


class MethodSpec(Protocol):
    """What the document needs of a method: its name, params struct, result type, summary."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> type[Params]: ...

    @property
    def result(self) -> Any: ...

    @property
    def summary(self) -> str: ...

    @property
    def agent(self) -> bool: ...


def merge_components(documents: dict[str, Any], structs: dict[str, Any]) -> dict[str, Any]:
    """The pydantic documents' schemas and the msgspec structs' in one namespace.

    A name both give must be the same enum (a status both sides use, like
    ``BattleStatus``): the document's schema is kept. Any other clash is a bug.
    """
    merged = dict(documents)
    for name, schema in structs.items():
        known = merged.get(name)
        if known is not None and set(known.get("enum", ())) != set(schema.get("enum", [None])):
            raise ValueError(f"component {name!r} is both a document schema and a struct")
        merged.setdefault(name, schema)
    return merged


def openrpc_document(specs: Iterable[MethodSpec]) -> dict[str, Any]:
    methods = sorted(specs, key=lambda m: m.name)
    types = [m.params for m in methods] + [m.result for m in methods]
    schemas, components = msgspec.json.schema_components(types, ref_template=REF)
    param_schemas, result_schemas = schemas[: len(methods)], schemas[len(methods) :]
    out_methods = []
    for method, schema, result in zip(methods, param_schemas, result_schemas, strict=True):
        struct_name = schema["$ref"].rsplit("/", 1)[-1]
        struct_schema = components[struct_name]
        required = set(struct_schema.get("required", []))
        params = [
            {"name": name, "required": name in required, "schema": prop}
            for name, prop in struct_schema.get("properties", {}).items()
        ]
        entry: dict[str, Any] = {
            "name": method.name,
            "summary": method.summary,
            "paramStructure": "either",
            "params": params,
            "result": {"name": "result", "schema": result},
        }
        if method.agent:
            # An agent's own connection may call it (for its own repository and task).
            entry["x-agent"] = True
        out_methods.append(entry)
    components = merge_components(model_components(), components)
    return {
        "openrpc": "1.3.2",
        "info": {
            "title": "pokeralphd",
            "version": __version__,
            "description": "JSON-RPC 2.0 over a Unix socket; events come as `event` notifications.",
        },
        "methods": out_methods,
        "components": {
            "schemas": components,
            "errors": {
                code.name: {"code": int(code), "message": text}
                for code, text in ERROR_DESCRIPTIONS.items()
            },
        },
    }
