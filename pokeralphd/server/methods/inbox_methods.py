"""``inbox.*``: deliveries that need a person: list, show, create, answer, annotate,
close, and wait for an answer (without holding the connection up)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from pokeralphd.domain.ids import validate_delivery_id
from pokeralphd.domain.inbox import Source
from pokeralphd.errors import InvalidParams
from pokeralphd.inbox.service import DeliveryNotFound
from pokeralphd.protocol.params import (
    DeliveryRef,
    InboxAnnotateParams,
    InboxAnswerParams,
    InboxCreateParams,
    InboxListParams,
    InboxWaitParams,
)
from pokeralphd.protocol.results import (
    AnnotateResult,
    AnswerResult,
    CloseResult,
    DeliveryCreated,
    InboxGetResult,
    InboxItem,
    InboxListResult,
    WaitResult,
)

if TYPE_CHECKING:
    from pokeralphd.inbox.service import RepoInbox
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable

STATUSES = ("delivered", "awaiting_feedback", "completed", "timeout", "open")


def _find(ctx: CallContext, delivery_id: str, repo: str | None) -> RepoInbox:
    """The inbox holding ``delivery_id``: of the named repository, else of any."""
    validate_delivery_id(delivery_id)
    for candidate in ctx.repos.scope(repo):
        if candidate.inbox.holds(delivery_id):
            return candidate.inbox
    raise DeliveryNotFound(f"no delivery {delivery_id}", id=delivery_id)


def register(table: MethodTable) -> None:
    @table.add(
        "inbox.list",
        InboxListParams,
        "Deliveries across repositories (or one); status filters, `open` meaning awaiting an answer.",
        result=InboxListResult,
    )
    async def list_(ctx: CallContext, p: InboxListParams) -> InboxListResult:
        if p.status is not None and p.status not in STATUSES:
            raise InvalidParams(f"status must be one of {', '.join(STATUSES)}", field="status")
        items: list[InboxItem] = []
        for repo in ctx.repos.scope(p.repo):
            index = await repo.inbox.io(repo.inbox.store.index)
            for entry in index.items:
                if p.status == "open" and entry.status not in ("awaiting_feedback", "timeout"):
                    continue
                if p.status not in (None, "open") and entry.status != p.status:
                    continue
                items.append(msgspec.convert({"repo": repo.name, **entry.dump()}, InboxItem))
        items.sort(key=lambda e: (e.created_at, e.id))
        return InboxListResult(items=items)

    @table.add(
        "inbox.get",
        DeliveryRef,
        "One delivery with its feedback and annotations.",
        result=InboxGetResult,
    )
    async def get(ctx: CallContext, p: DeliveryRef) -> InboxGetResult:
        return msgspec.convert(await _find(ctx, p.id, p.repo).get(p.id), InboxGetResult)

    @table.add(
        "inbox.create",
        InboxCreateParams,
        "Publish a delivery (a markdown body, or text, or html the dashboard shows sandboxed; "
        "schema confirm/select/form/rating unless passive).",
        result=DeliveryCreated,
    )
    async def create(ctx: CallContext, p: InboxCreateParams) -> DeliveryCreated:
        repo = ctx.repos.resolve(p.repo)
        if p.timeout_seconds is not None and p.timeout_seconds <= 0:
            raise InvalidParams("timeoutSeconds must be positive", field="timeoutSeconds")
        source = Source(kind="agent" if p.task_id else "user", task_id=p.task_id)
        delivery = await repo.inbox.create(
            p.title,
            p.body,
            p.mode,
            p.schema,
            source,
            p.timeout_seconds,
            content_type=p.content_type,
        )
        return DeliveryCreated(repo=repo.name, delivery=delivery.dump())

    @table.add(
        "inbox.answer",
        InboxAnswerParams,
        "Answer a delivery; the values are checked against its schema before anything is stored.",
        result=AnswerResult,
    )
    async def answer(ctx: CallContext, p: InboxAnswerParams) -> AnswerResult:
        inbox = _find(ctx, p.id, p.repo)
        feedback = await inbox.answer(p.id, p.values, p.note)
        return AnswerResult(repo=inbox.name, feedback=feedback.dump())

    @table.add(
        "inbox.annotate",
        InboxAnnotateParams,
        "Add a comment or highlight to a delivery.",
        result=AnnotateResult,
    )
    async def annotate(ctx: CallContext, p: InboxAnnotateParams) -> AnnotateResult:
        inbox = _find(ctx, p.id, p.repo)
        annotation = await inbox.annotate(p.id, p.type, p.content, p.target)
        return AnnotateResult(annotation=annotation.dump())

    @table.add(
        "inbox.close", DeliveryRef, "Close a delivery without answering it.", result=CloseResult
    )
    async def close(ctx: CallContext, p: DeliveryRef) -> CloseResult:
        delivery = await _find(ctx, p.id, p.repo).close(p.id, "closed by a person")
        return CloseResult(delivery=delivery.dump())

    @table.add(
        "inbox.wait",
        InboxWaitParams,
        "Wait for an answer or the timeout (seconds); a timed-out blocking delivery stays answerable.",
        result=WaitResult,
        concurrent=True,
    )
    async def wait(ctx: CallContext, p: InboxWaitParams) -> WaitResult:
        if p.timeout is not None and p.timeout < 0:
            raise InvalidParams("timeout must not be negative", field="timeout")
        return msgspec.convert(await _find(ctx, p.id, p.repo).wait(p.id, p.timeout), WaitResult)
