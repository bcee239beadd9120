"""``inbox.*``: deliveries that need a person: list, show, create, answer, annotate,
close, and wait for an answer (without holding the connection up)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.domain.ids import validate_delivery_id
from pokeralphd.domain.inbox import Source
from pokeralphd.errors import InvalidParams, OutOfScope
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
    """The inbox holding ``delivery_id``: of the named repository, else of any (for an
    agent, of its own repository only)."""
    validate_delivery_id(delivery_id)
    candidates = [ctx.own_repo(repo)] if ctx.scope is not None else ctx.repos.scope(repo)
    for candidate in candidates:
        if candidate.inbox.holds(delivery_id):
            return candidate.inbox
    raise DeliveryNotFound(f"no delivery {delivery_id}", id=delivery_id)


async def _find_own(ctx: CallContext, delivery_id: str, repo: str | None) -> RepoInbox:
    """:func:`_find`, and for an agent only a delivery an agent of its own task made."""
    inbox = _find(ctx, delivery_id, repo)
    scope = ctx.scope
    if scope is not None:
        delivery = await inbox.io(inbox.store.load, delivery_id)
        source = delivery.source
        if source.kind != "agent" or source.task_id != scope.task_id:
            raise OutOfScope(scope, f"delivery {delivery_id} is not one it made")
    return inbox


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
            for item in await repo.inbox.items():
                if p.status == "open" and item.status not in ("awaiting_feedback", "timeout"):
                    continue
                if p.status not in (None, "open") and item.status != p.status:
                    continue
                items.append(item)
        items.sort(key=lambda e: (e.created_at, e.id))
        return InboxListResult(items=items)

    @table.add(
        "inbox.get",
        DeliveryRef,
        "One delivery with its feedback and annotations.",
        result=InboxGetResult,
        agent=True,
    )
    async def get(ctx: CallContext, p: DeliveryRef) -> InboxGetResult:
        inbox = await _find_own(ctx, p.id, p.repo)
        return await inbox.get(p.id)

    @table.add(
        "inbox.create",
        InboxCreateParams,
        "Publish a delivery (a markdown body, or text, or html the dashboard shows sandboxed; "
        "schema confirm/select/form/rating unless passive).",
        result=DeliveryCreated,
        agent=True,
    )
    async def create(ctx: CallContext, p: InboxCreateParams) -> DeliveryCreated:
        repo = ctx.own_repo(p.repo)
        task_id = ctx.own_task(p.task_id)
        if p.timeout_seconds is not None and p.timeout_seconds <= 0:
            raise InvalidParams("timeoutSeconds must be positive", field="timeoutSeconds")
        by_agent = task_id is not None or ctx.scope is not None
        source = Source(kind="agent" if by_agent else "user", task_id=task_id)
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
        agent=True,
    )
    async def wait(ctx: CallContext, p: InboxWaitParams) -> WaitResult:
        if p.timeout is not None and p.timeout < 0:
            raise InvalidParams("timeout must not be negative", field="timeout")
        inbox = await _find_own(ctx, p.id, p.repo)
        return await inbox.wait(p.id, p.timeout)
