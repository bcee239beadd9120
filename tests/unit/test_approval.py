"""Approval rules: canonical JSON, matching, deny wins, validation, blanket probing, and
the store's layers and usage file."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pokeralph_core.approval import (
    INPUT_MAX,
    RULES_MAX,
    ApprovalRule,
    RuleError,
    canonical,
    check_rules,
    decide,
    is_blanket,
    known_tool,
    rule_id,
)
from pokeralph_core.config import layers
from pokeralphd.errors import CorruptFile, InvalidParams, InvalidState, NotFound
from pokeralphd.store import config_writes as writes
from pokeralphd.store.rules import RuleStore, read_usage

GIT_STATUS = r'^\{"command":"git status"\}$'


def rule(tool: str, pattern: str, decision: str = "allow", **extra: Any) -> ApprovalRule:
    return ApprovalRule.model_validate(
        {
            "toolName": tool,
            "paramPattern": pattern,
            "decision": decision,
            "description": "d",
            **extra,
        }
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_round_trips_and_is_a_fixed_point(value: Any) -> None:
    text = canonical(value)
    assert json.loads(text) == value
    assert canonical(json.loads(text)) == text


@given(st.dictionaries(st.text(), st.integers(), min_size=2, max_size=6))
def test_canonical_json_ignores_key_order(value: dict[str, int]) -> None:
    reversed_order = dict(reversed(list(value.items())))
    assert canonical(value) == canonical(reversed_order)


def test_canonical_json_is_compact_and_keeps_unicode() -> None:
    assert canonical({"path": "é.txt", "a": [1, 2]}) == '{"a":[1,2],"path":"é.txt"}'
    with pytest.raises(ValueError):
        canonical({"x": float("nan")})


def test_matching_is_re_search_so_anchors_mean_what_they_say() -> None:
    seed_example = rule("read_file", r'^{"path":".*\.txt"}$')  # the seed's own example
    assert decide([seed_example], "read_file", {"path": "notes.txt"}).decision == "allow"
    assert decide([seed_example], "read_file", {"path": "x.txt", "n": 1}).decision is None
    unanchored = rule("Bash", "rm -rf", "deny")
    assert decide([unanchored], "Bash", {"command": "cd / && rm -rf x"}).decision == "deny"
    assert decide([unanchored], "Read", {"command": "rm -rf"}).decision is None  # other tool


def test_deny_wins_over_allow_in_any_order() -> None:
    allow = rule("Bash", r'^\{"command":"git ')
    deny = rule("Bash", "push", "deny")
    for rules in ([allow, deny], [deny, allow]):
        decided = decide(rules, "Bash", {"command": "git push"})
        assert decided.decision == "deny" and decided.rule is deny
        assert rules[decided.index or 0] is deny
    decided = decide([allow, deny], "Bash", {"command": "git log"})
    assert decided.decision == "allow" and decided.rule is allow and "allow rule" in decided.reason
    assert "deny wins" in decide([allow, deny], "Bash", {"command": "git push"}).reason


def test_no_match_leaves_it_to_the_policy() -> None:
    rules = [rule("Bash", GIT_STATUS)]
    none = decide(rules, "Bash", {"command": "ls"})
    assert none.decision is None and none.rule is None and "policy decides" in none.reason


def test_an_oversized_input_is_denied_before_any_rule() -> None:
    """It used to skip every rule, deny rules included, and fall to the policy."""
    allow = rule("Bash", r'^\{"command":"x+"\}$')
    huge = decide([allow], "Bash", {"command": "x" * (INPUT_MAX + 1)})
    assert huge.decision == "deny" and huge.rule is None and huge.limit == "too_large"
    assert f"{INPUT_MAX:,}" in huge.reason and "too large" in huge.reason
    assert decide([allow], "Bash", {"command": "x" * (INPUT_MAX - 20)}).decision == "allow"


def test_a_backtracking_pattern_denies_within_the_deadline() -> None:
    """``(a|aa)+$`` backtracks for minutes on forty ``a`` and a ``!``: the call is denied
    when the time runs out, naming the rule; the rules after it decide nothing."""
    slow = rule("Bash", "(a|aa)+$", "deny")
    later = rule("Bash", r'^\{"command":"a+!"\}$')
    began = time.monotonic()
    decided = decide([slow, later], "Bash", {"command": "a" * 40 + "!"}, seconds=0.2)
    assert time.monotonic() - began < 2
    assert decided.decision == "deny" and decided.rule is slow and decided.limit == "too_slow"
    assert "took too long" in decided.reason and slow.id in decided.reason
    # an allow rule that backtracks denies too: it cannot be told from what it hides
    decided = decide([rule("Bash", "(a|aa)+$")], "Bash", {"command": "a" * 40 + "!"}, 0.2)
    assert decided.decision == "deny" and decided.limit == "too_slow"
    # the same rule on an input it does not backtrack over decides as usual
    assert decide([slow], "Bash", {"command": "ls"}, seconds=0.2).decision is None


def test_a_pattern_that_backtracks_on_the_probes_is_refused_when_added() -> None:
    """The probes hold 300 ``z``: ``(z|zz)+$`` backtracks over them."""
    with pytest.raises(ValidationError) as info:
        rule("Bash", "(z|zz)+$", "deny")
    assert "backtracks" in str(info.value)


@pytest.mark.parametrize(
    ("tool", "pattern"),
    [
        ("Bash", ".*"),
        ("Bash", "^"),
        ("Bash", ""),
        ("Bash", r"\}$"),
        ("Bash", '"command":"'),
        ("Bash", "command"),
        ("read_file", r'^\{"path":'),
        ("mcp__github__create_issue", r"^\{"),
        ("WebFetch", "(?s)."),
    ],
)
def test_blanket_allow_rules_are_refused(tool: str, pattern: str) -> None:
    if pattern:
        assert is_blanket(tool, pattern)
    with pytest.raises(ValidationError) as info:
        rule(tool, pattern)
    assert "paramPattern" in str(info.value) or "at least 1" in str(info.value)


def test_specific_rules_and_blanket_denies_pass() -> None:
    assert not is_blanket("Bash", GIT_STATUS)
    assert not is_blanket("Bash", "git")
    assert not is_blanket("read_file", r'^{"path":".*\.txt"}$')
    assert rule("WebFetch", ".*", "deny").decision == "deny"  # "never fetch": takes power away


def test_validation_names_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match="not a valid regex"):
        rule("Bash", "(unclosed")
    with pytest.raises(ValidationError, match="unknown tool 'bash'"):
        rule("bash", GIT_STATUS)
    with pytest.raises(ValidationError, match="description"):
        ApprovalRule.model_validate(
            {
                "toolName": "Bash",
                "paramPattern": GIT_STATUS,
                "decision": "allow",
                "description": " ",
            }
        )
    with pytest.raises(ValidationError):
        rule("Bash", "x" * 1001, "deny")
    with pytest.raises(ValidationError):
        rule("Bash", GIT_STATUS, "maybe")


def test_known_tools() -> None:
    for name in ("Bash", "TodoWrite", "run_in_terminal", "fetch_webpage", "mcp__srv__tool"):
        assert known_tool(name)
    for name in ("bash", "mcp__", "mcp__srv", "rm", ""):
        assert not known_tool(name)


def test_ids_are_derived_stably_and_kept_when_given() -> None:
    derived = rule("Bash", GIT_STATUS)
    assert derived.id == rule_id("Bash", GIT_STATUS, "allow") == rule("Bash", GIT_STATUS).id
    assert derived.id != rule("Bash", GIT_STATUS, "deny").id
    assert rule("Bash", GIT_STATUS, id="mine").id == "mine"
    with pytest.raises(ValidationError):
        rule("Bash", GIT_STATUS, id="../x")


def test_a_layer_names_the_bad_rule_by_index_and_tool() -> None:
    rules = [rule("Bash", GIT_STATUS), rule("Read", "x", "deny"), rule("Bash", GIT_STATUS)]
    with pytest.raises(RuleError) as info:
        check_rules(rules)
    assert info.value.field == "approvalRules[2].id" and "(Bash)" in info.value.message
    with pytest.raises(RuleError, match="at most"):
        check_rules([rule("Bash", f"x{i}", "deny") for i in range(RULES_MAX + 1)])
    layer = {"approvalRules": [{"toolName": "Read", "paramPattern": ".*", "decision": "deny",
                                "description": "d"},
                               {"toolName": "Bash", "paramPattern": ".*", "decision": "allow",
                                "description": "everything"}]}  # fmt: skip
    with pytest.raises(InvalidParams) as params:
        layers.layer_rules(layer, None)
    assert params.value.data["field"] == "approvalRules[1].paramPattern"
    assert "approvalRules[1] (Bash)" in params.value.message
    with pytest.raises(CorruptFile):
        layers.layer_rules(layer, Path("/x/config.json"))


# --------------------------------------------------------------------------- the store


class Files:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "repo"
        self.repo = self.root / ".pokeralph" / "config.json"
        self.user = tmp / "config" / "config.json"
        self.state = tmp / "state"
        self.repo.parent.mkdir(parents=True)
        self.user.parent.mkdir(parents=True)
        self.state.mkdir()
        self.store = RuleStore(
            self.user,
            self.repo,
            self.root,
            self.repo.parent / "approval-usage.json",
            self.state / "approval-usage.json",
        )

    def write(self, path: Path, layer: dict[str, Any]) -> None:
        path.write_text(json.dumps({"schemaVersion": 1, "version": 1, **layer}))


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def test_layers_concatenate_repository_first(files: Files) -> None:
    files.store.add(rule("Bash", "push", "deny"), "user")
    files.store.add(rule("Bash", GIT_STATUS), "repo")
    current = files.store.current()
    assert [(r.source, r.rule.tool_name) for r in current.rules] == [
        ("repo", "Bash"),
        ("user", "Bash"),
    ]
    loaded = layers.load(files.user, files.repo, files.root)
    assert loaded.sources["approvalRules"] == "repo" and loaded.trust.trusted
    decision, which = current.decide("Bash", {"command": "git status"})
    assert decision.decision == "allow" and which is not None and which.source == "repo"
    # the repository layer stays trusted: the daemon wrote it for the user
    assert layers.TRUST_KEY in json.loads(files.user.read_text())


def test_usage_is_counted_durably_outside_the_config(files: Files) -> None:
    added = files.store.add(rule("Bash", GIT_STATUS), "repo")
    config_before = files.repo.read_text()
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    files.store.record_use("repo", added.rule.id, when)
    usage = files.store.record_use("repo", added.rule.id, when)
    assert usage.use_count == 2 and usage.last_used_at == when
    assert files.repo.read_text() == config_before  # the edited file does not churn
    again = files.store.current().rules[0]
    assert again.usage.use_count == 2
    assert again.view().use_count == 2 and again.view().source == "repo"
    # a hand edit of the description keeps the id, so the usage stays with the rule
    doc = json.loads(files.repo.read_text())
    doc["approvalRules"][0]["description"] = "edited by hand"
    files.repo.write_text(json.dumps(doc))
    assert writes.set_trust(files.user, files.repo, files.root, True)[0].trusted
    assert files.store.current().rules[0].usage.use_count == 2
    removed = files.store.remove(added.rule.id)
    assert [r.rule.id for r in removed] == [added.rule.id]
    assert read_usage(files.repo.parent / "approval-usage.json") == {}
    with pytest.raises(NotFound):
        files.store.remove(added.rule.id)


def test_an_untrusted_repository_cannot_allow_anything(files: Files) -> None:
    files.write(
        files.repo,
        {"approvalRules": [{"toolName": "Bash", "paramPattern": "^\\{\"command\":\"curl ",
                            "decision": "allow", "description": "fetch"}]},
    )  # fmt: skip
    current = files.store.current()
    assert current.rules == [] and current.ignored_repo_rules == 1
    assert current.trust_message and "approvalRules" in current.trust_message
    assert current.decide("Bash", {"command": "curl x"})[0].decision is None
    with pytest.raises(InvalidState, match="would be ignored"):
        files.store.add(rule("Bash", GIT_STATUS), "repo")
    files.store.add(rule("Bash", GIT_STATUS), "user")  # the user's own layer is fine
    assert [r.source for r in files.store.current().rules] == ["user"]


def test_a_duplicate_rule_is_refused(files: Files) -> None:
    files.store.add(rule("Bash", GIT_STATUS), "user")
    with pytest.raises(InvalidParams, match="already"):
        files.store.add(rule("Bash", GIT_STATUS), "user")
