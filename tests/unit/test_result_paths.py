"""Results are typed end to end (issue 22): the services build the result structs and the
handlers return them as they are; no handler converts a service's dict into its result
(decoding a request's params, in the dispatcher, is the edge and the one conversion)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import source_nodes

METHODS = Path(__file__).resolve().parents[2] / "pokeralphd" / "server" / "methods"


def _converts(path: Path) -> list[str]:
    found = []
    for node in source_nodes(path):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("convert", "to_builtins"):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_handler_converts_a_result() -> None:
    modules = sorted(METHODS.glob("*.py"))
    assert len(modules) > 10
    assert [site for path in modules for site in _converts(path)] == []
