"""The JSON-RPC method handlers, one module per area; ``build_table`` collects them all."""

from __future__ import annotations

from pokeralphd.server.dispatch import MethodTable


def build_table(debug: bool = False) -> MethodTable:
    from pokeralphd.server.methods import (
        battle_methods,
        config_methods,
        cost_methods,
        daemon_methods,
        event_methods,
        inbox_methods,
        notify_methods,
        planning_methods,
        prd_methods,
        repo_methods,
        rules_methods,
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
        battle_methods,
        inbox_methods,
        planning_methods,
        rules_methods,
        cost_methods,
        notify_methods,
    ):
        module.register(table)
    if debug:
        from pokeralphd.server.methods import debug_methods

        debug_methods.register(table)
    return table
