"""The inbox on disk, per repository (seed 002's layout under ``.pokeralph/inbox/``)::

    inbox/
    ├── index.json                  light summaries: id, mode, status, title, times
    └── deliveries/{id}/
        ├── delivery.json           the full delivery
        ├── feedback.json           answers, in order
        └── annotations.json        annotations, in order

Every file is a versioned document written atomically, never through a link (see
:mod:`pokeralph_core.safefs`). Delivery ids are validated before any path is built. Synchronous; the inbox service runs it off the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralph_core import documents, safefs
from pokeralph_core.documents import DocumentKind
from pokeralphd.domain.ids import validate_delivery_id
from pokeralphd.domain.inbox import (
    Annotation,
    AnnotationList,
    Delivery,
    Feedback,
    FeedbackList,
    Index,
    IndexEntry,
)
from pokeralphd.errors import NotFound

if TYPE_CHECKING:
    from pathlib import Path

DELIVERY_KIND = DocumentKind("delivery", Delivery)
INDEX_KIND = DocumentKind("inbox-index", Index)
FEEDBACK_KIND = DocumentKind("feedback", FeedbackList)
ANNOTATIONS_KIND = DocumentKind("annotations", AnnotationList)


class InboxStore:
    def __init__(self, pokeralph_dir: Path) -> None:
        self.dir = pokeralph_dir / "inbox"

    @property
    def index_path(self) -> Path:
        return self.dir / "index.json"

    def folder(self, delivery_id: str) -> Path:
        return self.dir / "deliveries" / validate_delivery_id(delivery_id)

    def exists(self, delivery_id: str) -> bool:
        return safefs.is_file(self.folder(delivery_id) / "delivery.json")

    # -- index
    def index(self) -> Index:
        loaded = documents.load(INDEX_KIND, self.index_path)
        return loaded.value if loaded else Index()

    def _put_index(self, delivery: Delivery) -> None:
        index = self.index()
        entry = IndexEntry(
            id=delivery.id,
            mode=delivery.mode,
            status=delivery.status,
            title=delivery.title,
            created_at=delivery.created_at,
            completed_at=delivery.completed_at,
        )
        index.items = [e for e in index.items if e.id != delivery.id] + [entry]
        index.items.sort(key=lambda e: (e.created_at, e.id))
        documents.save(INDEX_KIND, self.index_path, index)

    # -- deliveries
    def create(self, delivery: Delivery) -> None:
        folder = self.folder(delivery.id)
        documents.save(DELIVERY_KIND, folder / "delivery.json", delivery, expected_version=0)
        documents.save(FEEDBACK_KIND, folder / "feedback.json", FeedbackList())
        documents.save(ANNOTATIONS_KIND, folder / "annotations.json", AnnotationList())
        self._put_index(delivery)

    def load(self, delivery_id: str) -> Delivery:
        loaded = documents.load(DELIVERY_KIND, self.folder(delivery_id) / "delivery.json")
        if loaded is None:
            raise NotFound(f"no delivery {delivery_id}", id=delivery_id)
        return loaded.value

    def save(self, delivery: Delivery) -> None:
        documents.save(DELIVERY_KIND, self.folder(delivery.id) / "delivery.json", delivery)
        self._put_index(delivery)

    def feedback(self, delivery_id: str) -> list[Feedback]:
        loaded = documents.load(FEEDBACK_KIND, self.folder(delivery_id) / "feedback.json")
        return loaded.value.items if loaded else []

    def add_feedback(self, delivery_id: str, feedback: Feedback) -> None:
        items = [*self.feedback(delivery_id), feedback]
        documents.save(
            FEEDBACK_KIND, self.folder(delivery_id) / "feedback.json", FeedbackList(items=items)
        )

    def annotations(self, delivery_id: str) -> list[Annotation]:
        loaded = documents.load(ANNOTATIONS_KIND, self.folder(delivery_id) / "annotations.json")
        return loaded.value.items if loaded else []

    def add_annotation(self, delivery_id: str, annotation: Annotation) -> None:
        items = [*self.annotations(delivery_id), annotation]
        documents.save(
            ANNOTATIONS_KIND,
            self.folder(delivery_id) / "annotations.json",
            AnnotationList(items=items),
        )
