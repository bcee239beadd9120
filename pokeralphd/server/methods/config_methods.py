"""``config.*``: the layered configuration of a repository, and the user's trust in it.

A repository's ``.pokeralph/config.json`` comes with the repository; its sensitive keys
(``config_layers.SENSITIVE_KEYS``) apply only once the user trusted its content
(``config.trust``). ``config.get`` says what is ignored meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.errors import PokeralphError
from pokeralphd.protocol.params import ConfigTrustParams, ConfigUpdateParams, NoParams, RepoParams
from pokeralphd.store import config_layers

if TYPE_CHECKING:
    from pokeralphd.runtime import RepoRuntime
    from pokeralphd.server.dispatch import CallContext, MethodTable


async def set_trust(
    ctx: CallContext, runtime: RepoRuntime, trusted: bool, expected_hash: str | None
) -> dict[str, Any]:
    """Record (or remove) the user's trust in the repository layer as it is now."""
    async with runtime.write_lock:  # no config.update of this repository in between
        trust, values, changed = await runtime.io(
            config_layers.set_trust,
            ctx.daemon.paths.user_config_file,
            runtime.files.config_path,
            runtime.path,
            trusted,
            expected_hash,
        )
    if changed:  # the effective config may differ now
        current = await runtime.config_get()
        runtime.publish(
            "config_updated",
            {"config": current["config"], "version": current["version"], "patch": {}},
        )
    return {
        "repo": runtime.name,
        "path": str(runtime.path),
        "changed": changed,
        "trust": trust.describe(),
        "sensitiveValues": values,
    }


def register(table: MethodTable) -> None:
    @table.add(
        "config.get",
        RepoParams,
        "Effective config, which layer set each key, version, and whether the repository "
        "layer is trusted (which of its sensitive keys are ignored).",
    )
    async def get(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await ctx.daemon.resolve(params.repo).config_get()

    @table.add(
        "config.update",
        ConfigUpdateParams,
        "Set keys in the repository layer (null unsets, objects merge); validated before "
        "anything is written. A trusted layer stays trusted.",
    )
    async def update(ctx: CallContext, params: ConfigUpdateParams) -> dict[str, Any]:
        runtime = ctx.daemon.resolve(params.repo)
        return await runtime.config_update(params.patch, params.expected_version)

    @table.add(
        "config.trust",
        ConfigTrustParams,
        "Trust the repository layer's current content (with hash: only if unchanged), so "
        "its sensitive keys apply; recorded in the user's config.",
    )
    async def trust(ctx: CallContext, params: ConfigTrustParams) -> dict[str, Any]:
        return await set_trust(ctx, ctx.daemon.resolve(params.repo), True, params.hash)

    @table.add(
        "config.untrust",
        RepoParams,
        "Forget the trust in the repository layer: its sensitive keys are ignored again.",
    )
    async def untrust(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await set_trust(ctx, ctx.daemon.resolve(params.repo), False, None)

    @table.add(
        "config.trustList",
        NoParams,
        "Every registered repository's trust state (a repository whose config cannot be "
        "read has an error instead).",
    )
    async def trust_list(ctx: CallContext, params: NoParams) -> dict[str, Any]:
        repos: list[dict[str, Any]] = []
        for name in sorted(ctx.daemon.runtimes):
            runtime = ctx.daemon.runtimes[name]
            entry: dict[str, Any] = {"repo": name, "path": str(runtime.path)}
            if runtime.error:
                entry["error"] = runtime.error
            else:
                try:
                    entry["trust"] = (await runtime.config_get())["trust"]
                except PokeralphError as exc:
                    entry["error"] = exc.message
            repos.append(entry)
        return {"repos": repos}
