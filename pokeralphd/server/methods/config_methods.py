"""``config.get`` / ``config.update``: the layered configuration of a repository."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import ConfigUpdateParams, RepoParams

if TYPE_CHECKING:
    from pokeralphd.server.dispatch import CallContext, MethodTable


def register(table: MethodTable) -> None:
    @table.add("config.get", RepoParams, "Effective config, which layer set each key, version.")
    async def get(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await ctx.daemon.resolve(params.repo).config_get()

    @table.add(
        "config.update",
        ConfigUpdateParams,
        "Set keys in the repository layer (null unsets); validated before anything is written.",
    )
    async def update(ctx: CallContext, params: ConfigUpdateParams) -> dict[str, Any]:
        runtime = ctx.daemon.resolve(params.repo)
        return await runtime.config_update(params.patch, params.expected_version)
