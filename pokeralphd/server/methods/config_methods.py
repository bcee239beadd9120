"""``config.get`` / ``config.update``: the layered configuration of a repository."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import ConfigUpdateParams, RepoParams

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add("config.get", RepoParams, "Effective config, which layer set each key, version.")
    async def get(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await ctx.repos.resolve(params.repo).store.config_get()

    @table.add(
        "config.update",
        ConfigUpdateParams,
        "Set keys in the repository layer (null unsets); validated before anything is written.",
    )
    async def update(ctx: CallContext, params: ConfigUpdateParams) -> dict[str, Any]:
        store = ctx.repos.resolve(params.repo).store
        return await store.config_update(params.patch, params.expected_version)
