"""``repo.*``: register, unregister, list and inspect repositories."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.protocol.params import (
    NoParams,
    RepoParams,
    RepoRegisterParams,
)
from pokeralphd.protocol.results import RepoSummary, RepoUnregisterResult

if TYPE_CHECKING:
    from pokeralphd.repository import Repository
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


async def repo_summary(repo: Repository) -> RepoSummary:
    ref = repo.describe()
    out = RepoSummary(name=ref.name, path=ref.path, error=ref.error)
    if repo.error:
        return out
    prd, version = await repo.store.prd()
    counts: dict[str, int] = {}
    for task in prd.tasks if prd else []:
        counts[task.status.value] = counts.get(task.status.value, 0) + 1
    out.prd, out.prd_version, out.tasks = prd.name if prd else None, version, counts
    out.battle = repo.battles.summary()
    return out


def register(table: MethodTable) -> None:
    @table.add(
        "repo.register",
        RepoRegisterParams,
        "Register a git repository (absolute path); creates .pokeralph/ with defaults.",
        result=RepoSummary,
    )
    async def register_(ctx: CallContext, params: RepoRegisterParams) -> RepoSummary:
        repo = await ctx.repos.register(params.path, params.name, params.git_init)
        return await repo_summary(repo)

    @table.add(
        "repo.unregister",
        RepoParams,
        "Forget a repository (its files stay).",
        result=RepoUnregisterResult,
    )
    async def unregister(ctx: CallContext, params: RepoParams) -> RepoUnregisterResult:
        repo = ctx.repos.resolve(params.repo, usable=False)
        await ctx.repos.unregister(repo)
        return RepoUnregisterResult(name=repo.name, path=str(repo.path))

    @table.add("repo.list", NoParams, "Every registered repository.", result=list[RepoSummary])
    async def list_(ctx: CallContext, params: NoParams) -> list[RepoSummary]:
        return [await repo_summary(repo) for repo in sorted(ctx.repos, key=lambda r: r.name)]

    @table.add(
        "repo.status",
        RepoParams,
        "One repository: PRD, task counts, battle.",
        result=RepoSummary,
    )
    async def status(ctx: CallContext, params: RepoParams) -> RepoSummary:
        return await repo_summary(ctx.repos.resolve(params.repo, usable=False))
