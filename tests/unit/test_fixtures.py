"""Frozen files of every on-disk format, as a daemon of schema version 1 wrote them.

They never change: a new schema version must come with a migration that still loads
them (the test below proves it for every kind), and a round trip must keep them equal.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pokeralphd.planning.service import SESSION_KIND
from pokeralphd.store import config_layers, documents
from pokeralphd.store.documents import DocumentKind
from pokeralphd.store.filemanager import HISTORY_KIND, PRD_KIND, PROGRESS_KIND
from pokeralphd.store.inbox import ANNOTATIONS_KIND, DELIVERY_KIND, FEEDBACK_KIND, INDEX_KIND
from pokeralphd.store.registry import REGISTRY_KIND
from pokeralphd.store.rules import USAGE_KIND

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "v1"
KINDS: dict[str, DocumentKind[Any]] = {
    "prd.json": PRD_KIND,
    "progress.json": PROGRESS_KIND,
    "history.json": HISTORY_KIND,
    "registry.json": REGISTRY_KIND,
    "inbox-index.json": INDEX_KIND,
    "delivery.json": DELIVERY_KIND,
    "feedback.json": FEEDBACK_KIND,
    "annotations.json": ANNOTATIONS_KIND,
    "planning-session.json": SESSION_KIND,
    "approval-usage.json": USAGE_KIND,
}


def test_every_fixture_has_a_kind() -> None:
    files = {p.name for p in V1.glob("*.json")}
    assert files == set(KINDS) | {"repo-config.json", "user-config.json"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_frozen_file_still_loads_and_round_trips(name: str, tmp_path: Path) -> None:
    kind = KINDS[name]
    raw = json.loads((V1 / name).read_text())
    assert raw["schemaVersion"] == 1
    copy = tmp_path / name
    shutil.copy(V1 / name, copy)
    loaded = documents.load(kind, copy)
    assert loaded is not None
    assert loaded.version == raw["version"]
    again = documents.decode_document(
        kind, copy, json.loads(documents.encode_document(kind, loaded.value, loaded.version))
    )
    assert again.value == loaded.value
    # A save writes the next version in the current schema, and it loads again.
    version = documents.save(kind, copy, loaded.value)
    assert version == loaded.version + 1
    reloaded = documents.load(kind, copy)
    assert reloaded is not None and reloaded.value == loaded.value


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_newer_schema_migrates_the_frozen_file(name: str, tmp_path: Path) -> None:
    """What a schema bump must do: migrate every older file. Simulated with a kind one
    version ahead whose migration renames nothing but is required to run."""
    base = KINDS[name]
    ran: list[int] = []

    def migrate(body: dict[str, Any]) -> dict[str, Any]:
        ran.append(1)
        return body

    newer: DocumentKind[BaseModel] = DocumentKind(
        base.name, base.model, base.schema_version + 1, {base.schema_version: migrate}
    )
    copy = tmp_path / name
    shutil.copy(V1 / name, copy)
    loaded = documents.load(newer, copy)
    assert ran == [1]
    assert loaded is not None
    assert loaded.value == documents.load(base, V1 / name).value  # type: ignore[union-attr]


def test_the_frozen_config_layers_still_load(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".pokeralph").mkdir(parents=True)
    shutil.copy(V1 / "repo-config.json", repo / ".pokeralph" / "config.json")
    user = tmp_path / "user-config.json"
    shutil.copy(V1 / "user-config.json", user)
    loaded = config_layers.load(user, repo / ".pokeralph" / "config.json", repo)
    assert loaded.config.mode.value == "yolo"
    assert loaded.config.max_iterations_per_task == 5
    assert loaded.config.agent.backend == "demo"
    assert loaded.version == 2
    # The trust record names another path: this copy is untrusted, and says which keys
    # it ignores (its feedback command).
    assert not loaded.describe()["trust"]["trusted"]
    assert "feedbackCommands" in loaded.describe()["trust"]["ignoredKeys"]
