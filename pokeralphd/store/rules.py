"""The approval rules of one repository as stored: in the config layers, with usage apart.

Rules live in the config people edit (``approvalRules`` of the repository layer and of
the user's, see :mod:`pokeralph_core.config.layers`). How often each rule decided a
call, and when last, lives in a state file the daemon alone writes, so that those config
files do not change on every use:

- ``.pokeralph/approval-usage.json`` for the repository's rules,
- ``{user state dir}/approval-usage.json`` for the user's (shared by every repository).

Both are versioned documents (:data:`USAGE_KIND`), keyed by rule id. Everything here is
synchronous file I/O: the repository store runs it in a worker thread, under its write
lock for changes of the repository layer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pokeralph_core import documents
from pokeralph_core.approval import (
    ApprovalRule,
    ApprovalUsage,
    Decision,
    RuleSource,
    RuleUsage,
    decide,
)
from pokeralph_core.config import layers as config_layers
from pokeralph_core.config.layers import RULES_KEY
from pokeralph_core.documents import DocumentKind
from pokeralph_core.timeutil import iso_or_none
from pokeralphd.errors import InvalidParams, InvalidState, NotFound
from pokeralphd.protocol.results import RuleView
from pokeralphd.store import config_writes

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

USAGE_KIND = DocumentKind("approval-usage", ApprovalUsage)
USAGE_FILE = "approval-usage.json"

_locks_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def _lock(path: Path) -> threading.Lock:
    """One lock per usage file: the user's is written from every repository's thread."""
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


def read_usage(path: Path) -> dict[str, RuleUsage]:
    loaded = documents.load(USAGE_KIND, path)
    return dict(loaded.value.rules) if loaded is not None else {}


def record_use(path: Path, rule_id: str, when: datetime) -> RuleUsage:
    """Count one use of a rule, durably; the rule's usage now."""
    with _lock(path):
        usage = read_usage(path)
        before = usage.get(rule_id, RuleUsage())
        usage[rule_id] = now = RuleUsage(last_used_at=when, use_count=before.use_count + 1)
        documents.save(USAGE_KIND, path, ApprovalUsage(rules=usage))
        return now


def forget_usage(path: Path, rule_ids: list[str]) -> None:
    with _lock(path):
        usage = read_usage(path)
        if any(rule_id in usage for rule_id in rule_ids):
            for rule_id in rule_ids:
                usage.pop(rule_id, None)
            documents.save(USAGE_KIND, path, ApprovalUsage(rules=usage))


@dataclass(frozen=True)
class EffectiveRule:
    """A rule in effect, the layer it comes from, and its usage."""

    rule: ApprovalRule
    source: RuleSource
    usage: RuleUsage

    def view(self) -> RuleView:
        """As the wire shows it: the rule's fields, its source and usage."""
        rule, usage = self.rule, self.usage
        return RuleView(
            id=rule.id,
            tool_name=rule.tool_name,
            decision=rule.decision,
            param_pattern=rule.param_pattern,
            description=rule.description,
            created_at=iso_or_none(rule.created_at),
            source=self.source,
            last_used_at=iso_or_none(usage.last_used_at),
            use_count=usage.use_count,
        )


@dataclass(frozen=True)
class Rules:
    """The effective rules (repository's first) and what the untrusted layer holds back."""

    rules: list[EffectiveRule]
    ignored_repo_rules: int  # rules of an untrusted repository layer, not applied
    trust_message: str | None

    def decide(self, tool: str, tool_input: Any) -> tuple[Decision, EffectiveRule | None]:
        decision = decide([r.rule for r in self.rules], tool, tool_input)
        return decision, None if decision.index is None else self.rules[decision.index]


class RuleStore:
    """One repository's rules: read, add, remove, count uses."""

    def __init__(
        self,
        user_config_file: Path,
        repo_config_file: Path,
        repo_root: Path,
        repo_usage_file: Path,
        user_usage_file: Path,
    ) -> None:
        self.user_config_file = user_config_file
        self.repo_config_file = repo_config_file
        self.repo_root = repo_root
        self.usage_files: dict[RuleSource, Path] = {
            "repo": repo_usage_file,
            "user": user_usage_file,
        }

    def _layers(self) -> tuple[list[ApprovalRule], list[ApprovalRule], config_layers.Loaded]:
        loaded = config_layers.load(self.user_config_file, self.repo_config_file, self.repo_root)
        user_layer, _ = config_layers.read_layer(self.user_config_file)
        user = config_layers.layer_rules(user_layer, self.user_config_file) or []
        count = len(loaded.config.approval_rules) - len(user)
        return loaded.config.approval_rules[:count], user, loaded

    def current(self) -> Rules:
        repo, user, loaded = self._layers()
        out: list[EffectiveRule] = []
        layers: tuple[tuple[RuleSource, list[ApprovalRule]], ...] = (("repo", repo), ("user", user))
        for source, rules in layers:
            usage = read_usage(self.usage_files[source]) if rules else {}
            out += [EffectiveRule(r, source, usage.get(r.id, RuleUsage())) for r in rules]
        ignored = 0
        if RULES_KEY in loaded.trust.ignored_keys:
            ignored = len(loaded.repo_layer.get(RULES_KEY) or [])
        return Rules(out, ignored, loaded.trust.message() if ignored else None)

    def record_use(self, source: RuleSource, rule_id: str, when: datetime) -> RuleUsage:
        """Count a use of the rule ``rule_id`` of layer ``source`` (the state file only)."""
        return record_use(self.usage_files[source], rule_id, when)

    def add(self, rule: ApprovalRule, scope: RuleSource) -> EffectiveRule:
        """Append ``rule`` to the ``scope`` layer. The caller holds the repository's write
        lock (for the repository layer); the user layer, which every repository's thread
        writes, is read and written in one locked step. Refused: a rule with the same id
        in that layer, and a repository rule while the repository layer is not trusted
        (it would be written and then ignored)."""

        def appended(layer: dict[str, Any]) -> dict[str, Any]:
            existing = list(layer.get(RULES_KEY) or [])
            for index, item in enumerate(existing):
                if isinstance(item, dict) and _id_of(item) == rule.id:
                    raise InvalidParams(
                        f"the {scope} layer has this rule already: approvalRules[{index}], "
                        f"id {rule.id}",
                        field="paramPattern",
                        id=rule.id,
                    )
            return {RULES_KEY: [*existing, rule.dump()]}

        if scope == "user":
            config_writes.edit_user_layer(self.user_config_file, appended)
            return EffectiveRule(rule, scope, RuleUsage())
        loaded = config_layers.load(self.user_config_file, self.repo_config_file, self.repo_root)
        if not loaded.trust.trusted:
            raise InvalidState(
                f"{loaded.trust.message()}: a rule added there would be ignored; run "
                "`pokeralphctl trust` first, or add the rule with scope user",
                trust=loaded.trust.describe(),
            )
        layer, version = config_layers.read_layer(self.repo_config_file)
        config_writes.update_repo_layer(
            self.user_config_file, self.repo_config_file, self.repo_root, appended(layer), version
        )
        return EffectiveRule(rule, scope, RuleUsage())

    def remove(self, rule_id: str) -> list[EffectiveRule]:
        """Remove the rule ``rule_id`` from every layer that has it (and its usage)."""
        current = self.current()
        removed = [r for r in current.rules if r.rule.id == rule_id]
        sources: set[RuleSource] = {r.source for r in removed}
        # a rule of the untrusted repository layer is not in effect, but may be removed
        repo_layer, repo_version = config_layers.read_layer(self.repo_config_file)
        repo_items = list(repo_layer.get(RULES_KEY) or [])
        if any(isinstance(i, dict) and _id_of(i) == rule_id for i in repo_items):
            sources.add("repo")
        if not sources:
            raise NotFound(f"no approval rule with id {rule_id!r}", id=rule_id)
        if "repo" in sources:
            kept = [i for i in repo_items if not (isinstance(i, dict) and _id_of(i) == rule_id)]
            config_writes.update_repo_layer(
                self.user_config_file,
                self.repo_config_file,
                self.repo_root,
                {RULES_KEY: kept or None},
                repo_version,
            )
        if "user" in sources:
            config_writes.edit_user_layer(
                self.user_config_file, lambda layer: _without_rule(layer, rule_id)
            )
        for source in sources:
            forget_usage(self.usage_files[source], [rule_id])
        return removed


def add_to_user_layer(user_config_file: Path, rules: list[ApprovalRule]) -> list[str]:
    """Append to the user layer each of ``rules`` it does not hold yet (the same id, given
    or derived as validation derives it); the ids added. For rules the daemon offers on
    the user's behalf (the local agent's read-only defaults), where one the user has
    already is no error. One locked read-modify-write: no rule added meanwhile is lost."""
    added: list[str] = []

    def appended(layer: dict[str, Any]) -> dict[str, Any] | None:
        existing = list(layer.get(RULES_KEY) or [])
        held = {_id_of(item) for item in existing if isinstance(item, dict)}
        new = [rule for rule in rules if rule.id not in held]
        added[:] = [rule.id for rule in new]
        return {RULES_KEY: [*existing, *(r.dump() for r in new)]} if new else None

    config_writes.edit_user_layer(user_config_file, appended)
    return added


def _without_rule(layer: dict[str, Any], rule_id: str) -> dict[str, Any] | None:
    """The patch removing the rule ``rule_id`` from a layer's list (None: not there)."""
    items = list(layer.get(RULES_KEY) or [])
    kept = [i for i in items if not (isinstance(i, dict) and _id_of(i) == rule_id)]
    return {RULES_KEY: kept or None} if len(kept) != len(items) else None


def _id_of(item: dict[str, Any]) -> str | None:
    """The id of a rule as a layer holds it (given, or derived as validation does)."""
    try:
        return ApprovalRule.model_validate(item).id
    except ValueError:
        given = item.get("id")
        return given if isinstance(given, str) else None
