"""The JSON-RPC method handlers, one module per area; ``build_table`` collects them all."""

from __future__ import annotations

from pokeralphd.server.dispatch import MethodTable


def build_table() -> MethodTable:
    from pokeralphd.server.methods import (
        config_methods,
        daemon_methods,
        event_methods,
        prd_methods,
        repo_methods,
        task_methods,
    )

    table = MethodTable()
    for module in (
        daemon_methods,
        repo_methods,
        config_methods,
        prd_methods,
        task_methods,
        event_methods,
    ):
        module.register(table)
    return table
