"""Frozen files of every on-disk format, as a daemon of schema version 1 wrote them
(``fixtures/v1``), and of the formats bumped since (``fixtures/v2``: the PRD and the
battle history of seed 003's phases).

They never change: a new schema version must come with a migration that still loads
them (the tests below prove it for every kind), and a round trip must keep them equal.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pokeralph_core import documents
from pokeralph_core.config import layers as config_layers
from pokeralph_core.documents import DocumentKind
from pokeralphd.errors import CorruptFile
from pokeralphd.planning.service import SESSION_KIND
from pokeralphd.store.filemanager import (
    HISTORY_KIND,
    PRD_KIND,
    PROGRESS_KIND,
    REVIEW_KIND,
    VERIFICATION_KIND,
)
from pokeralphd.store.inbox import ANNOTATIONS_KIND, DELIVERY_KIND, FEEDBACK_KIND, INDEX_KIND
from pokeralphd.store.registry import REGISTRY_KIND
from pokeralphd.store.rules import USAGE_KIND

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "v1"
V2 = V1.parent / "v2"
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
    "verification-report.json": VERIFICATION_KIND,
    "review-report.json": REVIEW_KIND,
}
KINDS_V2: dict[str, DocumentKind[Any]] = {"prd.json": PRD_KIND, "history.json": HISTORY_KIND}


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
        base.name,
        base.model,
        base.schema_version + 1,
        {**base.migrations, base.schema_version: migrate},
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
    assert loaded.config.feedback_loops == ["test"]
    assert loaded.config.max_iterations_per_task == 5  # lower than the default: it applies
    assert loaded.version == 2
    # The trust record names another path: this copy is untrusted, and says which keys
    # wait for trust (its agent, feedback command and yolo).
    assert not loaded.trust.describe()["trusted"]
    assert loaded.config.mode.value == "hitl" and loaded.config.agent.backend == "claude"
    assert loaded.trust.describe()["ignoredKeys"] == [
        "mode",
        "agent.backend",
        "feedbackCommands",
    ]


def test_every_v2_fixture_has_a_kind_at_schema_2() -> None:
    assert {p.name for p in V2.glob("*.json")} == set(KINDS_V2)
    assert all(kind.schema_version == 2 for kind in KINDS_V2.values())


@pytest.mark.parametrize("name", sorted(KINDS_V2))
def test_a_frozen_v2_file_loads_and_round_trips(name: str, tmp_path: Path) -> None:
    kind = KINDS_V2[name]
    raw = json.loads((V2 / name).read_text())
    assert raw["schemaVersion"] == 2
    copy = tmp_path / name
    shutil.copy(V2 / name, copy)
    loaded = documents.load(kind, copy)
    assert loaded is not None and loaded.version == raw["version"]
    body = json.loads(documents.encode_document(kind, loaded.value, loaded.version))
    # nothing lost (fields added since, with their defaults, may come along)
    assert _holds(body, raw)
    again = documents.decode_document(kind, copy, body)
    assert again.value == loaded.value


def test_a_v1_history_migrates_to_the_phases_of_v2(tmp_path: Path) -> None:
    """Schema 1 battles ran their implementation alone: a completed one is done."""
    loaded = documents.load(HISTORY_KIND, V1 / "history.json")
    assert loaded is not None
    battle = loaded.value
    assert battle.phases == ["implementation"] and battle.phase == "done"
    assert battle.verification.count == 0 and battle.escalations == []
    raw = json.loads((V1 / "history.json").read_text())
    raw["status"] = "paused"
    (tmp_path / "h.json").write_text(json.dumps(raw))
    paused = documents.load(HISTORY_KIND, tmp_path / "h.json")
    assert paused is not None and paused.value.phase == "implementation"
    # what a v2 daemon writes, a v1 daemon refuses (it would not understand the statuses)
    v1_kind: DocumentKind[BaseModel] = DocumentKind("history", HISTORY_KIND.model)
    with pytest.raises(CorruptFile, match="newer than this pokeralphd understands"):
        documents.load(v1_kind, V2 / "history.json")


def test_the_v2_history_holds_a_whole_escalation() -> None:
    loaded = documents.load(HISTORY_KIND, V2 / "history.json")
    assert loaded is not None
    battle = loaded.value
    assert battle.phases == ["implementation", "verification", "review"]
    (escalation,) = battle.escalations
    assert escalation.reason == "review_cycles" and escalation.resolution is not None
    assert escalation.resolution.action == "retry" and escalation.resolution.applied
    assert battle.guidance == "Validate the input first."
    assert [r.outcome for r in battle.review.reports] == ["request_changes", "approve"]


def _holds(found: Any, frozen: Any) -> bool:
    """``found`` has everything ``frozen`` has, equal (objects may have more keys)."""
    if isinstance(frozen, dict):
        return isinstance(found, dict) and all(
            k in found and _holds(found[k], v) for k, v in frozen.items()
        )
    if isinstance(frozen, list):
        return (
            isinstance(found, list)
            and len(found) == len(frozen)
            and all(_holds(a, b) for a, b in zip(found, frozen, strict=True))
        )
    return bool(found == frozen)
