"""``config.*``: the layered configuration of a repository, and the user's trust in it.

A repository's ``.pokeralph/config.json`` comes with the repository; until the user
trusted its content (``config.trust``) it may only make things stricter
(:mod:`pokeralph_core.config.tightening`): ``config.get`` says which of its keys wait for
trust (``ignoredKeys``) and which apply because they only tighten (``tighteningKeys``).
A layer or a patch with a snake_case key is refused, naming it.

``config.getUser`` and ``config.updateUser`` read and edit the user's layer (what
applies to every repository, and what only it may hold: ``notify.webhooks``), so a
person never opens the file; webhook URLs come back redacted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from pokeralph_core.config import layers as config_layers
from pokeralphd.errors import InvalidParams, PokeralphError
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.params import (
    ConfigTrustParams,
    ConfigUpdateParams,
    ConfigUserUpdateParams,
    NoParams,
    RepoParams,
)
from pokeralphd.protocol.results import (
    ConfigResult,
    TrustEntry,
    TrustListResult,
    TrustResult,
    UserConfigResult,
)
from pokeralphd.store import config_views, config_writes

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "config.get",
        RepoParams,
        "Effective config, which layer set each key, version, and whether the repository "
        "layer is trusted (untrusted: which of its keys wait for trust, which apply because "
        "they only tighten).",
        result=ConfigResult,
    )
    async def get(ctx: CallContext, params: RepoParams) -> ConfigResult:
        return await ctx.repos.resolve(params.repo).store.config_get()

    @table.add(
        "config.update",
        ConfigUpdateParams,
        "Set keys in the repository layer (null unsets, objects merge); validated before "
        "anything is written. A trusted layer stays trusted.",
        result=ConfigResult,
    )
    async def update(ctx: CallContext, params: ConfigUpdateParams) -> ConfigResult:
        store = ctx.repos.resolve(params.repo).store
        return await store.config_update(params.patch, params.expected_version)

    @table.add(
        "config.trust",
        ConfigTrustParams,
        "Trust the repository layer's current content (with hash: only if unchanged), so "
        "what it sets applies even where it loosens; recorded in the user's config. "
        "sensitiveValues: the keys that waited for this.",
        result=TrustResult,
    )
    async def trust(ctx: CallContext, params: ConfigTrustParams) -> TrustResult:
        return await ctx.repos.resolve(params.repo).store.set_trust(True, params.hash)

    @table.add(
        "config.untrust",
        RepoParams,
        "Forget the trust in the repository layer: what it sets that loosens waits again.",
        result=TrustResult,
    )
    async def untrust(ctx: CallContext, params: RepoParams) -> TrustResult:
        return await ctx.repos.resolve(params.repo).store.set_trust(False, None)

    @table.add(
        "config.trustList",
        NoParams,
        "Every registered repository's trust state (a repository whose config cannot be "
        "read has an error instead).",
        result=TrustListResult,
    )
    async def trust_list(ctx: CallContext, params: NoParams) -> TrustListResult:
        repos: list[TrustEntry] = []
        for repo in sorted(ctx.repos, key=lambda r: r.name):
            entry = TrustEntry(repo=repo.name, path=str(repo.path))
            if repo.error:
                entry.error = repo.error
            else:
                try:
                    config = await repo.store.config_get()
                except PokeralphError as exc:
                    entry.error = exc.message
                else:
                    entry.trust = config.trust
            repos.append(entry)
        return TrustListResult(repos=repos)

    @table.add(
        "config.getUser",
        NoParams,
        "The user's layer (webhook URLs redacted), its version and file, and the config it "
        "makes with the defaults.",
        result=UserConfigResult,
    )
    async def get_user(ctx: CallContext, params: NoParams) -> UserConfigResult:
        path = _user_file(ctx)
        return await anyio.to_thread.run_sync(config_views.user_config_result, path)

    @table.add(
        "config.updateUser",
        ConfigUserUpdateParams,
        "Set keys in the user's layer (null unsets, objects merge, a list replaces); "
        "validated before anything is written; a config_updated event with no repository "
        "follows (URLs redacted).",
        result=UserConfigResult,
    )
    async def update_user(ctx: CallContext, params: ConfigUserUpdateParams) -> UserConfigResult:
        path = _user_file(ctx)

        def write() -> UserConfigResult:
            version = config_writes.update_user_layer(path, params.patch, params.expected_version)
            return config_views.user_config_result(path, version)

        described = await anyio.to_thread.run_sync(write)
        ctx.services.bus.publish(
            ev.ConfigUpdated(
                config=described.config,
                version=described.version,
                patch=config_layers.redacted(params.patch),
            ),
            None,
        )
        return described


def _user_file(ctx: CallContext) -> Path:
    if ctx.services.user_config_file is None:
        raise InvalidParams("this daemon has no user config file")
    return ctx.services.user_config_file
