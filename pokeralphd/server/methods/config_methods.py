"""``config.*``: the layered configuration of a repository, and the user's trust in it.

A repository's ``.pokeralph/config.json`` comes with the repository; its sensitive keys
(``config_layers.SENSITIVE_KEYS``) apply only once the user trusted its content
(``config.trust``). ``config.get`` says what is ignored meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.errors import PokeralphError
from pokeralphd.protocol.params import ConfigTrustParams, ConfigUpdateParams, NoParams, RepoParams

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "config.get",
        RepoParams,
        "Effective config, which layer set each key, version, and whether the repository "
        "layer is trusted (which of its sensitive keys are ignored).",
    )
    async def get(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await ctx.repos.resolve(params.repo).store.config_get()

    @table.add(
        "config.update",
        ConfigUpdateParams,
        "Set keys in the repository layer (null unsets, objects merge); validated before "
        "anything is written. A trusted layer stays trusted.",
    )
    async def update(ctx: CallContext, params: ConfigUpdateParams) -> dict[str, Any]:
        store = ctx.repos.resolve(params.repo).store
        return await store.config_update(params.patch, params.expected_version)

    @table.add(
        "config.trust",
        ConfigTrustParams,
        "Trust the repository layer's current content (with hash: only if unchanged), so "
        "its sensitive keys apply; recorded in the user's config.",
    )
    async def trust(ctx: CallContext, params: ConfigTrustParams) -> dict[str, Any]:
        return await ctx.repos.resolve(params.repo).store.set_trust(True, params.hash)

    @table.add(
        "config.untrust",
        RepoParams,
        "Forget the trust in the repository layer: its sensitive keys are ignored again.",
    )
    async def untrust(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await ctx.repos.resolve(params.repo).store.set_trust(False, None)

    @table.add(
        "config.trustList",
        NoParams,
        "Every registered repository's trust state (a repository whose config cannot be "
        "read has an error instead).",
    )
    async def trust_list(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        repos: list[dict[str, Any]] = []
        for repo in sorted(ctx.repos, key=lambda r: r.name):
            entry: dict[str, Any] = {"repo": repo.name, "path": str(repo.path)}
            if repo.error:
                entry["error"] = repo.error
            else:
                try:
                    entry["trust"] = (await repo.store.config_get())["trust"]
                except PokeralphError as exc:
                    entry["error"] = exc.message
            repos.append(entry)
        return {"repos": repos}
