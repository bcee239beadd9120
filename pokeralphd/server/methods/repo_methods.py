"""``repo.*``: register, unregister, list and inspect repositories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import (
    NoParams,
    RepoParams,
    RepoRegisterParams,
)

if TYPE_CHECKING:
    from pokeralphd.server.dispatch import CallContext, MethodTable


async def repo_summary(ctx: CallContext, name: str) -> dict[str, Any]:
    runtime = ctx.daemon.runtimes[name]
    out = runtime.describe()
    if runtime.error:
        return out
    prd, version = await runtime.prd()
    counts: dict[str, int] = {}
    for task in prd.tasks if prd else []:
        counts[task.status.value] = counts.get(task.status.value, 0) + 1
    out.update({"prd": prd.name if prd else None, "prdVersion": version, "tasks": counts})
    if runtime.battles is not None:
        out["battle"] = runtime.battles.summary()
    return out


def register(table: MethodTable) -> None:
    @table.add(
        "repo.register",
        RepoRegisterParams,
        "Register a git repository (absolute path); creates .pokeralph/ with defaults.",
    )
    async def register_(ctx: CallContext, params: RepoRegisterParams) -> dict[str, Any]:
        runtime = await ctx.daemon.register(params.path, params.name, params.git_init)
        return await repo_summary(ctx, runtime.name)

    @table.add("repo.unregister", RepoParams, "Forget a repository (its files stay).")
    async def unregister(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        runtime = ctx.daemon.resolve(params.repo, usable=False)
        await ctx.daemon.unregister(runtime)
        return {"name": runtime.name, "path": str(runtime.path)}

    @table.add("repo.list", NoParams, "Every registered repository.")
    async def list_(ctx: CallContext, params: NoParams) -> list[dict[str, Any]]:
        return [await repo_summary(ctx, name) for name in sorted(ctx.daemon.runtimes)]

    @table.add("repo.status", RepoParams, "One repository: PRD, task counts, battle.")
    async def status(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        runtime = ctx.daemon.resolve(params.repo, usable=False)
        return await repo_summary(ctx, runtime.name)
