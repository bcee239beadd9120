"""The OpenRPC document of the daemon's methods, generated from the method table.

``rpc.discover`` returns it and ``shared/openrpc.json`` is this same document, so the
contract can never drift from the code without a test noticing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from pokeralphd import __version__
from pokeralphd.protocol.codes import ERROR_DESCRIPTIONS
from pokeralphd.protocol.results import RESULTS, model_components

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pokeralphd.protocol.params import Params


class MethodSpec(Protocol):
    """What the document needs of a method: its name, params struct and summary."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> type[Params]: ...

    @property
    def summary(self) -> str: ...


def openrpc_document(specs: Iterable[MethodSpec]) -> dict[str, Any]:
    methods = sorted(specs, key=lambda m: m.name)
    param_types = [m.params for m in methods]
    schemas, components = msgspec.json.schema_components(
        param_types, ref_template="#/components/schemas/{name}"
    )
    out_methods = []
    for method, schema in zip(methods, schemas, strict=True):
        struct_name = schema["$ref"].rsplit("/", 1)[-1]
        struct_schema = components[struct_name]
        required = set(struct_schema.get("required", []))
        params = [
            {"name": name, "required": name in required, "schema": prop}
            for name, prop in struct_schema.get("properties", {}).items()
        ]
        out_methods.append(
            {
                "name": method.name,
                "summary": method.summary,
                "paramStructure": "either",
                "params": params,
                "result": {"name": "result", "schema": RESULTS.get(method.name, {})},
            }
        )
    components = {**model_components(), **components}
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
