"""The result types: every method has one, they encode as the wire always was, and the
structs that mirror a document stay in step with it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from pokeralphd.domain.inbox import IndexEntry
from pokeralphd.domain.planning import PlanningSession
from pokeralphd.protocol import results
from pokeralphd.protocol.openrpc import merge_components
from pokeralphd.server.methods import build_table


def wire_names(struct: type[msgspec.Struct]) -> set[str]:
    return set(struct.__struct_encode_fields__)


def test_every_method_registers_a_result_type() -> None:
    table = build_table(debug=True)
    for method in table.methods.values():
        assert method.result is not None, method.name
        msgspec.json.schema(method.result)  # a type msgspec can describe


def test_every_reference_in_the_document_resolves() -> None:
    doc = build_table(debug=True).discover()
    text = json.dumps(doc)
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs <= set(doc["components"]["schemas"])
    assert {"Task", "PRD", "Battle", "Progress", "Delivery", "Feedback", "Annotation"} <= refs


def test_documents_are_referred_to_not_copied() -> None:
    schema = build_table().discover()["components"]["schemas"]["TaskResult"]
    assert schema["properties"]["task"]["$ref"] == "#/components/schemas/Task"
    assert schema["additionalProperties"] is False
    assert set(results.DOCUMENT_MODELS) == {
        "Config",
        "PRD",
        "Task",
        "Battle",
        "Progress",
        "Delivery",
        "Feedback",
        "Annotation",
        "VerificationReport",
        "ReviewReport",
    }


def test_mirrors_of_documents_keep_their_fields() -> None:
    session = {f.alias or name for name, f in PlanningSession.model_fields.items()}
    assert wire_names(results.PlanningStatus) == session
    entry = {f.alias or name for name, f in IndexEntry.model_fields.items()}
    assert wire_names(results.InboxItem) == entry | {"repo"}


def test_optional_members_stay_absent_on_the_wire() -> None:
    live = results.SubscribeResult(subscription=1, seq=5, epoch="e")
    assert json.loads(msgspec.json.encode(live)) == {"subscription": 1, "seq": 5, "epoch": "e"}
    live.oldest_seq = 3
    assert json.loads(msgspec.json.encode(live))["oldestSeq"] == 3
    broken = msgspec.convert({"name": "r", "path": "/r", "error": "gone"}, results.RepoSummary)
    assert json.loads(msgspec.json.encode(broken)) == {"name": "r", "path": "/r", "error": "gone"}


def test_a_key_the_contract_does_not_name_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `extra`"):
        msgspec.convert(
            {"taskId": "001-a", "revertCommit": "abc", "extra": 1}, results.RevertResult
        )
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"battle": {}, "queued": "yes"}, results.BattleStartResult)


def test_components_of_both_kinds_merge_only_on_the_same_enum() -> None:
    documents: dict[str, Any] = {"Status": {"enum": ["a", "b"], "type": "string"}, "Doc": {}}
    assert merge_components(documents, {"Status": {"enum": ["b", "a"]}})["Status"] == {
        "enum": ["a", "b"],
        "type": "string",
    }
    with pytest.raises(ValueError, match="'Status'"):
        merge_components(documents, {"Status": {"enum": ["a"]}})
    with pytest.raises(ValueError, match="'Doc'"):
        merge_components(documents, {"Doc": {"type": "object"}})
