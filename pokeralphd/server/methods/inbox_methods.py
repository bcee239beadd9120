"""``inbox.*``: deliveries that need a person: list, show, create, answer, annotate,
close, and wait for an answer (without holding the connection up)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    )
    async def list_(ctx: CallContext, p: InboxListParams) -> dict[str, Any]:
        if p.status is not None and p.status not in STATUSES:
            raise InvalidParams(f"status must be one of {', '.join(STATUSES)}", field="status")
        items: list[dict[str, Any]] = []
        for repo in ctx.repos.scope(p.repo):
            index = await repo.inbox.io(repo.inbox.store.index)
            for entry in index.items:
                if p.status == "open" and entry.status not in ("awaiting_feedback", "timeout"):
                    continue
                if p.status not in (None, "open") and entry.status != p.status:
                    continue
                items.append({"repo": repo.name, **entry.dump()})
        items.sort(key=lambda e: (e["createdAt"], e["id"]))
        return {"items": items}

    @table.add("inbox.get", DeliveryRef, "One delivery with its feedback and annotations.")
    async def get(ctx: CallContext, p: DeliveryRef) -> dict[str, Any]:
        return await _find(ctx, p.id, p.repo).get(p.id)

    @table.add(
        "inbox.create",
        InboxCreateParams,
        "Publish a delivery (markdown body; schema confirm/select/form/rating unless passive).",
    )
    async def create(ctx: CallContext, p: InboxCreateParams) -> dict[str, Any]:
        repo = ctx.repos.resolve(p.repo)
        if p.timeout_seconds is not None and p.timeout_seconds <= 0:
            raise InvalidParams("timeoutSeconds must be positive", field="timeoutSeconds")
        source = Source(kind="agent" if p.task_id else "user", task_id=p.task_id)
        delivery = await repo.inbox.create(
            p.title, p.body, p.mode, p.schema, source, p.timeout_seconds
        )
        return {"repo": repo.name, "delivery": delivery.dump()}

    @table.add(
        "inbox.answer",
        InboxAnswerParams,
        "Answer a delivery; the values are checked against its schema before anything is stored.",
    )
    async def answer(ctx: CallContext, p: InboxAnswerParams) -> dict[str, Any]:
        inbox = _find(ctx, p.id, p.repo)
        feedback = await inbox.answer(p.id, p.values, p.note)
        return {"repo": inbox.name, "feedback": feedback.dump()}

    @table.add("inbox.annotate", InboxAnnotateParams, "Add a comment or highlight to a delivery.")
    async def annotate(ctx: CallContext, p: InboxAnnotateParams) -> dict[str, Any]:
        inbox = _find(ctx, p.id, p.repo)
        annotation = await inbox.annotate(p.id, p.type, p.content, p.target)
        return {"annotation": annotation.dump()}

    @table.add("inbox.close", DeliveryRef, "Close a delivery without answering it.")
    async def close(ctx: CallContext, p: DeliveryRef) -> dict[str, Any]:
        delivery = await _find(ctx, p.id, p.repo).close(p.id, "closed by a person")
        return {"delivery": delivery.dump()}

    @table.add(
        "inbox.wait",
        InboxWaitParams,
        "Wait for an answer or the timeout (seconds); a timed-out blocking delivery stays answerable.",
        concurrent=True,
    )
    async def wait(ctx: CallContext, p: InboxWaitParams) -> dict[str, Any]:
        if p.timeout is not None and p.timeout < 0:
            raise InvalidParams("timeout must not be negative", field="timeout")
        return await _find(ctx, p.id, p.repo).wait(p.id, p.timeout)
