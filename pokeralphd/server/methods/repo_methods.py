"""``repo.*``: register, unregister, list and inspect repositories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.protocol.params import (
    NoParams,
    RepoParams,
    RepoRegisterParams,
)

if TYPE_CHECKING:
    from pokeralphd.repository import Repository
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


async def repo_summary(repo: Repository) -> dict[str, Any]:
    out = repo.describe()
    if repo.error:
        return out
    prd, version = await repo.store.prd()
    counts: dict[str, int] = {}
    for task in prd.tasks if prd else []:
        counts[task.status.value] = counts.get(task.status.value, 0) + 1
    out.update({"prd": prd.name if prd else None, "prdVersion": version, "tasks": counts})
    out["battle"] = repo.battles.summary()
    return out


def register(table: MethodTable) -> None:
    @table.add(
        "repo.register",
        RepoRegisterParams,
        "Register a git repository (absolute path); creates .pokeralph/ with defaults.",
    )
    async def register_(ctx: CallContext, params: RepoRegisterParams) -> dict[str, Any]:
        repo = await ctx.repos.register(params.path, params.name, params.git_init)
        return await repo_summary(repo)

    @table.add("repo.unregister", RepoParams, "Forget a repository (its files stay).")
    async def unregister(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        repo = ctx.repos.resolve(params.repo, usable=False)
        await ctx.repos.unregister(repo)
        return {"name": repo.name, "path": str(repo.path)}

    @table.add("repo.list", NoParams, "Every registered repository.")
    async def list_(ctx: CallContext, params: NoParams) -> list[dict[str, Any]]:
        return [await repo_summary(repo) for repo in sorted(ctx.repos, key=lambda r: r.name)]

    @table.add("repo.status", RepoParams, "One repository: PRD, task counts, battle.")
    async def status(ctx: CallContext, params: RepoParams) -> dict[str, Any]:
        return await repo_summary(ctx.repos.resolve(params.repo, usable=False))
