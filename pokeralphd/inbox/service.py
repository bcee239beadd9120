"""InboxService: every repository's inbox, answers, annotations and blocking waits.

Deliveries live on disk per repository (``store.inbox``); waiters and answer callbacks
live in memory. A wait that times out marks a blocking delivery ``timeout`` and returns,
but the delivery stays answerable: a later answer is stored and announced as usual.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import TypeAdapter, ValidationError

from pokeralph_core.timeutil import iso, iso_or_none, utcnow
from pokeralphd.domain.inbox import (
    DELIVERY_TRANSITIONS,
    MAX_WAIT_SECONDS,
    Annotation,
    Delivery,
    Feedback,
    FeedbackSchema,
    InvalidAnswer,
    Source,
    TextTarget,
    validate_answer,
)
from pokeralphd.errors import InvalidParams, InvalidState, NotFound, PokeralphError
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.results import InboxGetResult, InboxItem, WaitResult
from pokeralphd.store.inbox import InboxStore
from pokeralphd.validation import validated

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskStatus

    from pokeralphd.ports import AnswerCallback
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)
_schema_adapter: TypeAdapter[Any] = TypeAdapter(FeedbackSchema)
SCHEMA_TYPES = ("confirm", "select", "form", "rating")


class AnswerRejected(PokeralphError):
    code = ErrorCode.INVALID_ANSWER


class DeliveryNotFound(PokeralphError):
    code = ErrorCode.DELIVERY_NOT_FOUND


class IdMaker:
    """``{prefix}_{unix seconds}_{seq}``, the sequence restarting every second."""

    def __init__(self) -> None:
        self._second = 0
        self._seq = itertools.count(1)

    def __call__(self, prefix: str) -> str:
        now = int(time.time())
        if now != self._second:
            self._second, self._seq = now, itertools.count(1)
        return f"{prefix}_{now}_{next(self._seq):03d}"


def parse_schema(raw: dict[str, Any] | None) -> Any:
    if raw is None:
        return None
    try:
        return _schema_adapter.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [p for i, p in enumerate(err["loc"]) if not (i == 0 and p in SCHEMA_TYPES)]
        name, message = (
            "schema" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc),
            err["msg"],
        )
        raise InvalidParams(f"invalid feedback schema: {name}: {message}", field=name) from exc


class RepoInbox:
    """One repository's inbox (it satisfies :class:`pokeralphd.ports.Inbox`)."""

    def __init__(self, repo: RepoStore, service: InboxService) -> None:
        self.repo = repo
        self.service = service
        self.store = InboxStore(repo.files.dir)
        self.lock = anyio.Lock()

    @property
    def name(self) -> str:
        return self.repo.name

    def publish(self, event: ev.Payload, delivery: Delivery) -> None:
        self.repo.publish(event, delivery.source.task_id)

    def on_answer(self, delivery_id: str, callback: AnswerCallback) -> None:
        self.service.callbacks[delivery_id] = callback

    def holds(self, delivery_id: str) -> bool:
        """Whether this inbox has ``delivery_id`` (never for an unusable repository)."""
        return self.repo.failure is None and self.store.exists(delivery_id)

    async def io(self, func: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(func, *args)

    async def create(
        self,
        title: str,
        body: str,
        mode: str,
        schema: dict[str, Any] | None,
        source: Source | None = None,
        timeout_seconds: float | None = None,
        on_answer: AnswerCallback | None = None,
        content_type: str = "markdown",
    ) -> Delivery:
        parsed = parse_schema(schema)
        if mode == "passive" and parsed is not None:
            raise InvalidParams("a passive delivery takes no schema", field="schema")
        if mode != "passive" and parsed is None:
            raise InvalidParams(f"a delivery of mode {mode} needs a schema", field="schema")
        if timeout_seconds is not None and not 0 < timeout_seconds <= MAX_WAIT_SECONDS:
            raise InvalidParams(
                f"timeoutSeconds must be more than 0 and at most {MAX_WAIT_SECONDS} (a week)",
                field="timeoutSeconds",
            )
        async with self.lock:
            delivery_id = self.service.ids("d")
            while await self.io(self.store.exists, delivery_id):
                delivery_id = self.service.ids("d")
            delivery = validated(
                Delivery,
                {
                    "id": delivery_id,
                    "mode": mode,
                    "status": "delivered" if mode == "passive" else "awaiting_feedback",
                    "title": title,
                    "content": {"type": content_type, "body": body},
                    "feedbackSchema": parsed,
                    "source": source or Source(),
                    "timeoutAt": (
                        utcnow() + timedelta(seconds=timeout_seconds) if timeout_seconds else None
                    ),
                },
                "delivery",
            )
            await self.io(self.store.create, delivery)
        if on_answer is not None:
            self.service.callbacks[delivery.id] = on_answer
        self.publish(ev.NewDelivery(id=delivery.id, delivery=delivery.dump()), delivery)
        return delivery

    async def items(self) -> list[InboxItem]:
        """The index's entries, with this repository's name (``inbox.list``)."""
        index = await self.io(self.store.index)
        return [
            InboxItem(
                repo=self.name,
                id=e.id,
                mode=e.mode,
                status=e.status,
                title=e.title,
                created_at=iso(e.created_at),
                completed_at=iso_or_none(e.completed_at),
            )
            for e in index.items
        ]

    async def get(self, delivery_id: str) -> InboxGetResult:
        delivery = await self.io(self.store.load, delivery_id)
        feedback = await self.io(self.store.feedback, delivery_id)
        annotations = await self.io(self.store.annotations, delivery_id)
        return InboxGetResult(
            repo=self.repo.name,
            delivery=delivery.dump(),
            feedback=[f.dump() for f in feedback],
            annotations=[a.dump() for a in annotations],
        )

    async def answer(self, delivery_id: str, values: Any, note: str | None) -> Feedback:
        async with self.lock:
            delivery: Delivery = await self.io(self.store.load, delivery_id)
            if delivery.feedback_schema is None:
                raise InvalidState(f"{delivery_id} is passive: it takes no answer", id=delivery_id)
            if delivery.status == "completed":
                raise InvalidState(f"{delivery_id} is already answered or closed", id=delivery_id)
            try:
                normalised = validate_answer(delivery.feedback_schema, values)
            except InvalidAnswer as exc:
                raise AnswerRejected(str(exc), field=exc.field, id=delivery_id) from exc
            feedback = Feedback(id=self.service.ids("f"), values=normalised, note=note)
            await self.io(self.store.add_feedback, delivery_id, feedback)
            _move(delivery, "completed")
            delivery.completed_at = utcnow()
            await self.io(self.store.save, delivery)
        self.publish(
            ev.FeedbackReceived(id=delivery.id, feedback=feedback.dump(), delivery=delivery.dump()),
            delivery,
        )
        self.service.wake(delivery_id)
        callback = self.service.callbacks.pop(delivery_id, None)
        if callback is not None:
            try:
                await callback(delivery, feedback)
            except PokeralphError as exc:
                log.warning("answer to %s could not be applied: %s", delivery_id, exc.message)
        return feedback

    async def answer_of(self, delivery_id: str) -> tuple[Delivery, Feedback | None]:
        delivery: Delivery = await self.io(self.store.load, delivery_id)
        feedback = await self.io(self.store.feedback, delivery_id)
        return delivery, (feedback[-1] if feedback else None)

    async def annotate(
        self, delivery_id: str, kind: str, content: str, target: dict[str, Any] | None
    ) -> Annotation:
        async with self.lock:
            delivery = await self.io(self.store.load, delivery_id)
            annotation = validated(
                Annotation,
                {
                    "id": self.service.ids("a"),
                    "type": kind,
                    "content": content,
                    "target": validated(TextTarget, target, "target", "target") if target else None,
                },
                "annotation",
            )
            await self.io(self.store.add_annotation, delivery_id, annotation)
        self.publish(ev.AnnotationAdded(id=delivery.id, annotation=annotation.dump()), delivery)
        return annotation

    async def close(self, delivery_id: str, reason: str | None = None) -> Delivery:
        async with self.lock:
            delivery: Delivery = await self.io(self.store.load, delivery_id)
            if delivery.status != "completed" and delivery.status != "delivered":
                _move(delivery, "completed")
                delivery.completed_at = utcnow()
                await self.io(self.store.save, delivery)
        self.service.callbacks.pop(delivery_id, None)
        self.service.wake(delivery_id)
        self.publish(
            ev.DeliveryClosed(id=delivery.id, reason=reason, delivery=delivery.dump()), delivery
        )
        return delivery

    async def record_outside_answer(
        self, delivery_id: str, values: dict[str, Any], note: str | None
    ) -> None:
        """The question was settled elsewhere (say, ``battle.approve``): store that answer."""
        self.service.callbacks.pop(delivery_id, None)
        with contextlib.suppress(InvalidState, NotFound):
            await self.answer(delivery_id, values, note)

    async def wait(self, delivery_id: str, timeout: float | None) -> WaitResult:
        if timeout is not None and not 0 <= timeout <= MAX_WAIT_SECONDS:
            raise InvalidParams(
                f"timeout must be 0 to {MAX_WAIT_SECONDS} seconds (a week)", field="timeout"
            )
        delivery: Delivery = await self.io(self.store.load, delivery_id)
        if delivery.feedback_schema is None:
            raise InvalidState(
                f"{delivery_id} is passive: there is no answer to wait for", id=delivery_id
            )
        if delivery.status != "completed":
            event = self.service.waiter(delivery_id)
            with anyio.move_on_after(timeout if timeout is not None else float("inf")):
                await event.wait()
            delivery = await self.io(self.store.load, delivery_id)
            if delivery.status != "completed":
                if delivery.mode == "blocking" and delivery.status == "awaiting_feedback":
                    async with self.lock:
                        delivery = await self.io(self.store.load, delivery_id)
                        if delivery.status == "awaiting_feedback":
                            _move(delivery, "timeout")
                            await self.io(self.store.save, delivery)
                    self.publish(
                        ev.DeliveryTimeout(id=delivery.id, delivery=delivery.dump()), delivery
                    )
                return WaitResult(status="timeout", id=delivery_id, repo=self.repo.name)
        feedback = await self.io(self.store.feedback, delivery_id)
        return WaitResult(
            status="answered" if feedback else "closed",
            id=delivery_id,
            repo=self.repo.name,
            answer=feedback[-1].dump() if feedback else None,
        )


def _move(delivery: Delivery, status: str) -> None:
    if status != delivery.status and status not in DELIVERY_TRANSITIONS[delivery.status]:
        raise InvalidState(
            f"delivery {delivery.id} cannot go from {delivery.status} to {status}", id=delivery.id
        )
    delivery.status = status  # type: ignore[assignment]


class InboxService:
    """Daemon-wide side of the inbox: ids, waiters, answer callbacks; a
    :class:`RepoInbox` per repository (``attach``)."""

    def __init__(self) -> None:
        self.ids = IdMaker()
        self.callbacks: dict[str, AnswerCallback] = {}
        self._waiters: dict[str, anyio.Event] = {}

    def waiter(self, delivery_id: str) -> anyio.Event:
        event = self._waiters.get(delivery_id)
        if event is None or event.is_set():
            event = self._waiters[delivery_id] = anyio.Event()
        return event

    def wake(self, delivery_id: str) -> None:
        event = self._waiters.pop(delivery_id, None)
        if event is not None:
            event.set()

    # -- lifecycle
    def attach(self, repo: RepoStore) -> RepoInbox:
        return RepoInbox(repo, self)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    async def stop(self) -> None:
        for event in self._waiters.values():
            event.set()
