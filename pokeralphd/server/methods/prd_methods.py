"""``prd.get`` / ``prd.update``: the repository's PRD."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.domain.models import PRD, PRDMetadata
from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import PrdUpdateParams, RepoParams
from pokeralphd.protocol.results import PrdGetResult, PrdResult
from pokeralphd.validation import validated

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def register(table: MethodTable) -> None:
    @table.add(
        "prd.get",
        RepoParams,
        "The PRD with its tasks (null if none yet) and its version.",
        result=PrdGetResult,
    )
    async def get(ctx: CallContext, params: RepoParams) -> PrdGetResult:
        prd, version = await ctx.repos.resolve(params.repo).store.prd()
        return PrdGetResult(prd=prd.dump() if prd else None, version=version)

    @table.add(
        "prd.update",
        PrdUpdateParams,
        "Replace the PRD (prd) or set name/description/metadata; expectedVersion guards.",
        result=PrdResult,
    )
    async def update(ctx: CallContext, params: PrdUpdateParams) -> PrdResult:
        repo = ctx.repos.resolve(params.repo)
        store = repo.store
        if params.prd is not None:
            if params.name or params.description or params.metadata:
                raise InvalidParams("pass either prd or name/description/metadata", field="prd")
            prd, version = await repo.replace_prd(params.prd, params.expected_version)
            return PrdResult(prd=prd.dump(), version=version)
        if params.name is None and params.description is None and params.metadata is None:
            raise InvalidParams(
                "nothing to update: pass prd, name, description or metadata", field="prd"
            )
        metadata = (
            validated(PRDMetadata, params.metadata, "metadata", "metadata")
            if params.metadata is not None
            else None
        )

        def change(old: PRD) -> PRD:
            if params.name is not None:
                old.name = params.name
            if params.description is not None:
                old.description = params.description
            if metadata is not None:
                old.metadata = metadata
            return old

        try:
            prd, version = await store.update_prd(change, params.expected_version)
        except ValueError as exc:  # validate_assignment on name/description
            raise InvalidParams(
                f"invalid PRD: {exc}", field="name" if params.name is not None else "description"
            ) from exc
        return PrdResult(prd=prd.dump(), version=version)
