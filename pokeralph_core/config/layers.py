"""Layered configuration: built-in defaults, then the user's file, then the repository's.

The user layer lives at ``{user config dir}/pokeralph/config.json`` and the repository
layer at ``.pokeralph/config.json``; each holds only the keys it sets. Layers merge like
a JSON merge patch: objects (``agent``, ``agent.env``, ``feedbackCommands``) merge key by
key at every depth, anything else replaces, ``null`` unsets. A layer that makes the
result invalid is named in the error, with the field.

**Spelling.** A layer (either file, or a patch asked for) is validated accepting the
camelCase spelling only: the models also take their Python names (``extra_args``), and
a key a gate does not know by that name would slip past it. A snake_case key is an error
naming it (:func:`validate`).

**Trust.** The repository layer comes with the repository: whoever wrote the clone, a
pull or an agent's edit wrote it, not the user. Until the user trusted that exact content
(``pokeralphctl trust``: the user layer records the sha256 of the repository layer's
canonical content, every key but the ``version`` counter, under :data:`TRUST_KEY`, per
repository root), it may only make things stricter: :mod:`pokeralph_core.config.tightening`
says, key by key, what only tightens (a deny rule, a stricter ``permissions.unmatched``,
a lower cap or bound) and so applies, and what waits for trust (all of ``agent``,
``roles`` and ``feedbackCommands``, allow rules, anything that loosens). It is decided on
validated models: the layers below (defaults, user), and those with the whole repository
layer merged over them; :class:`Trust` names the keys of each kind. Keys that are not
sensitive apply as they are. Changes the daemon writes at the user's request keep a
trusted layer trusted (the daemon's ``pokeralphd.store.config_writes.update_repo_layer``).

Reading is shared: the daemon and the standalone ``pokeralph-agent`` both load the
effective config with :func:`load`. Writing the layers is the daemon's alone
(``pokeralphd.store.config_writes``, built on what this module reads and checks).

**Notifications** (``notify``): a repository layer may only make its own quieter, trusted
or not (:func:`pokeralph_core.config.tightening.quieter_notify`), and may not name a webhook
at all. A webhook's URL is a secret of the user's layer: whatever describes a config
(``config.get``, ``config_updated`` events, the user layer's own description) shows it
redacted (:func:`redacted`).

**Approval rules** (``approvalRules``) are the one key that does not replace: the
effective list is the repository layer's rules, then the user's. Each layer's list is
checked on its own, so an error names the file and the rule's index in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import types
import typing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from pokeralph_core.approval import ApprovalRule, RuleError, check_rules
from pokeralph_core.config import tightening
from pokeralph_core.config.model import Config
from pokeralph_core.documents import META_KEYS, field_path, first_error, read_json
from pokeralph_core.errors import CorruptFile, InvalidParams, PokeralphError

if TYPE_CHECKING:
    from pathlib import Path

CONFIG_SCHEMA_VERSION = 1

#: The user layer's trust records: ``{"/repository/root": "sha256:…"}``. Only the user
#: layer may hold it; it is not part of :class:`Config`.
TRUST_KEY = "trustedRepoConfigs"
TRUST_HINT = "read .pokeralph/config.json, then run `pokeralphctl trust` to apply it"

#: The approval rules: concatenated across layers (repository first), never replaced.
RULES_KEY = "approvalRules"

#: ``notify.webhooks``: the user's layer alone may set it (:func:`_refuse_user_only`).
WEBHOOKS_KEY = "webhooks"


def merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """``layer`` over ``base`` (a JSON merge patch): objects merge, ``None`` unsets."""
    out = dict(base)
    for key, value in layer.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        elif isinstance(value, dict):
            out[key] = merge({}, value)  # drop the nulls inside
        else:
            out[key] = value
    return out


def default_layer() -> dict[str, Any]:
    return Config().dump()


def read_raw(path: Path) -> dict[str, Any]:
    """A layer's whole JSON object as on disk, ``{}`` if there is no file."""
    try:
        raw = read_json(path)
    except FileNotFoundError:
        return {}
    if not isinstance(raw, dict):
        raise CorruptFile(path, f"expected a JSON object, found {type(raw).__name__}")
    schema = raw.get("schemaVersion", 1)
    if isinstance(schema, int) and schema > CONFIG_SCHEMA_VERSION:
        raise CorruptFile(path, f"schemaVersion {schema} is newer than supported", "schemaVersion")
    return raw


def split_document(raw: dict[str, Any]) -> tuple[dict[str, Any], int]:
    version = raw.get("version", 0)
    layer = {k: v for k, v in raw.items() if k not in META_KEYS}
    return layer, version if isinstance(version, int) and not isinstance(version, bool) else 0


def read_layer(path: Path) -> tuple[dict[str, Any], int]:
    """A layer's keys (without ``schemaVersion``/``version``) and its version; {} if absent."""
    return split_document(read_raw(path))


def spelled_error(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The error to name, as ``(field, message)``: a snake_case key first (it is the
    likely cause of the others), else the first."""
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = loc[-1] if loc else None
        if err["type"] == "extra_forbidden" and isinstance(key, str) and to_camel(key) != key:
            name = field_path(loc)
            name = f"{prefix}.{name}" if prefix else name
            return name, f"{key} is not a config key: keys are spelled camelCase ({to_camel(key)})"
    return first_error(exc, prefix)


def validate(data: dict[str, Any], source: Path | None) -> Config:
    """``data`` as a :class:`Config`, keys in the camelCase spelling only."""
    try:
        return Config.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        name, message = spelled_error(exc)
        if source is None:
            raise InvalidParams(f"config field {name}: {message}", field=name) from exc
        raise CorruptFile(source, message, name) from exc


def _refuse(source: Path | None, field: str, message: str) -> PokeralphError:
    if source is None:
        return InvalidParams(message, field=field)
    return CorruptFile(source, message, field)


def layer_rules(layer: dict[str, Any], source: Path | None) -> list[ApprovalRule] | None:
    """A layer's approval rules, each validated (``None``: the layer sets none).

    An error names the rule by its index in this layer and its tool; from ``source`` it is
    :class:`CorruptFile`, else (a change asked for) :class:`InvalidParams`.
    """
    raw = layer.get(RULES_KEY)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise _refuse(source, RULES_KEY, f"{RULES_KEY} must be a list of rules")
    rules: list[ApprovalRule] = []
    for index, item in enumerate(raw):
        try:
            rules.append(ApprovalRule.model_validate(item, by_alias=True, by_name=False))
        except ValidationError as exc:
            field, message = spelled_error(exc, f"{RULES_KEY}[{index}]")
            tool = item.get("toolName") if isinstance(item, dict) else None
            who = f"{RULES_KEY}[{index}]" + (f" ({tool})" if isinstance(tool, str) else "")
            raise _refuse(source, field, f"{who}: {field}: {message}") from exc
    try:
        check_rules(rules)
    except RuleError as exc:
        raise _refuse(source, exc.field, exc.message) from exc
    return rules


# --------------------------------------------------------------------------- trust


def layer_hash(raw: dict[str, Any]) -> str:
    """``sha256:…`` of a layer's canonical JSON (sorted keys, no ``version`` counter)."""
    content = {k: v for k, v in raw.items() if k != "version"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def lookup(layer: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = layer
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def dotted_patch(dotted: str, value: Any) -> dict[str, Any]:
    """The patch setting the dotted key: ``budget.perDay`` -> ``{"budget": {"perDay": v}}``."""
    patch: dict[str, Any] = {}
    node = patch
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return patch


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``AgentConfig | None`` -> ``AgentConfig``), if any; not
    the items of a list or a map (``approvalRules`` is one key)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for candidate in (annotation, *(typing.get_args(annotation) if union else ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def layer_keys(layer: dict[str, Any], model: type[BaseModel] = Config) -> list[str]:
    """The dotted keys a layer sets, in the model's order, down to the fields of nested
    models (``roles.verifier.local.baseUrl``); a map, a list or a ``null`` is one key.
    Keys the model does not know by their camelCase name are not listed: the layer
    failed validation before this is asked (:func:`validate`)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        alias = field.alias or to_camel(name)
        if alias not in layer:
            continue
        value, inner = layer[alias], _submodel(field.annotation)
        if inner is not None and isinstance(value, dict):
            keys += [f"{alias}.{key}" for key in layer_keys(value, inner)]
        else:
            keys.append(alias)
    return keys


def sensitive_keys(layer: dict[str, Any]) -> list[str]:
    """The keys a layer sets that need trust unless they only tighten
    (:func:`pokeralph_core.config.tightening.sensitive`; an empty value counts: ``[]``
    replaces)."""
    return [key for key in layer_keys(layer) if tightening.sensitive(key)]


def without(layer: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``layer`` without the dotted ``keys``; an object left empty by that goes too."""
    out = copy.deepcopy(layer)
    for dotted in keys:
        *parents, last = dotted.split(".")
        chain: list[dict[str, Any]] = [out]
        for part in parents:
            node = chain[-1].get(part)
            if not isinstance(node, dict):
                break
            chain.append(node)
        else:
            chain[-1].pop(last, None)
            for part, parent in zip(reversed(parents), reversed(chain[:-1]), strict=True):
                if parent.get(part) == {}:
                    parent.pop(part)
    return out


def trust_records(user_layer: dict[str, Any], source: Path | None) -> dict[str, str]:
    """The user layer's :data:`TRUST_KEY` object, checked: repository root -> hash."""
    records = user_layer.get(TRUST_KEY, {})
    if not isinstance(records, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in records.items()
    ):
        reason = "expected an object of repository path -> sha256 hash"
        if source is None:
            raise InvalidParams(f"{TRUST_KEY}: {reason}", field=TRUST_KEY)
        raise CorruptFile(source, reason, TRUST_KEY)
    return dict(records)


def refuse_trust_key(layer: dict[str, Any], source: Path | None) -> None:
    if TRUST_KEY in layer:
        reason = f"{TRUST_KEY} may only be set in the user's config, never by a repository"
        if source is None:
            raise InvalidParams(reason, field=TRUST_KEY)
        raise CorruptFile(source, reason, TRUST_KEY)


def refuse_user_only(layer: dict[str, Any], source: Path | None) -> None:
    """A repository layer may not hold what only the user's may: the trust records, and
    webhooks (their URLs are the user's secrets; a repository's webhook would carry the
    user's notifications to whoever wrote it)."""
    refuse_trust_key(layer, source)
    notify = layer.get("notify")
    if isinstance(notify, dict) and notify.get(WEBHOOKS_KEY) is not None:
        field = f"notify.{WEBHOOKS_KEY}"
        reason = f"{field} may only be set in the user's config (`config set --user`)"
        if source is None:
            raise InvalidParams(reason, field=field)
        raise CorruptFile(source, reason, field)


def redact_url(url: Any) -> str:
    """A webhook URL as it may be shown: its scheme and host, the rest (the path, a
    query, credentials: where services put the secret) replaced. Not a valid URL, so
    writing it back is refused rather than taken."""
    try:
        parts = urlsplit(str(url))
        host = f"{parts.scheme}://{parts.hostname}" if parts.hostname else "?"
    except ValueError:
        host = "?"
    return f"<secret: {host}/…>"


def redacted(data: dict[str, Any]) -> dict[str, Any]:
    """A config or a layer (camelCase, as dumped) with every webhook URL redacted."""
    notify = data.get("notify")
    if not isinstance(notify, dict) or not isinstance(notify.get(WEBHOOKS_KEY), list):
        return data
    hooks = [
        {**hook, "url": redact_url(hook["url"])}
        if isinstance(hook, dict) and "url" in hook
        else hook
        for hook in notify[WEBHOOKS_KEY]
    ]
    return {**data, "notify": {**notify, WEBHOOKS_KEY: hooks}}


@dataclass(frozen=True)
class Trust:
    """Whether a repository layer applies in full, and if not, which of its sensitive
    keys wait for trust and which apply because they only tighten.

    ``waiting`` is known once the layer was weighed against the layers below it
    (:func:`load`); until then (``None``) every sensitive key counts as waiting.
    """

    hash: str
    sensitive_keys: list[str]  # the sensitive keys the layer sets
    trusted_hash: str | None  # what the user layer records for this repository
    waiting: list[str] | None = None  # untrusted: the sensitive keys that would loosen
    tightening: list[str] | None = None  # untrusted: those applied, they only tighten

    @property
    def recorded(self) -> bool:
        return self.trusted_hash == self.hash

    @property
    def trusted(self) -> bool:
        """The layer applies in full: it sets no sensitive key, or this content is
        trusted. (Not: nothing of it waits; that depends on the user's layer.)"""
        return not self.sensitive_keys or self.recorded

    @property
    def ignored_keys(self) -> list[str]:
        """The sensitive keys that wait for trust (the values below apply)."""
        if self.trusted:
            return []
        return list(self.sensitive_keys if self.waiting is None else self.waiting)

    @property
    def tightening_keys(self) -> list[str]:
        """The sensitive keys applied without trust because they only tighten."""
        return [] if self.trusted else list(self.tightening or [])

    def message(self) -> str | None:
        if self.trusted:
            return None
        changed = " (it changed since you trusted it)" if self.trusted_hash else ""
        parts = []
        if self.ignored_keys:
            parts.append(
                f"{', '.join(self.ignored_keys)} ignored until trusted (they loosen, or "
                "choose what runs; the user's or default values apply)"
            )
        if self.tightening_keys:
            parts.append(f"{', '.join(self.tightening_keys)} applied (they only tighten)")
        return f"the repository's .pokeralph/config.json is not trusted{changed}: " + "; ".join(
            parts
        )

    def describe(self) -> dict[str, Any]:
        return {
            "trusted": self.trusted,
            "hash": self.hash,
            "trustedHash": self.trusted_hash,
            "sensitiveKeys": list(self.sensitive_keys),
            "ignoredKeys": self.ignored_keys,
            "tighteningKeys": self.tightening_keys,
            "message": self.message(),
            "hint": TRUST_HINT if self.ignored_keys else None,
        }


def repo_trust(repo_raw: dict[str, Any], records: dict[str, str], root: Path | None) -> Trust:
    layer, _ = split_document(repo_raw)
    return Trust(
        hash=layer_hash(repo_raw),
        sensitive_keys=sensitive_keys(layer),
        trusted_hash=records.get(str(root)) if root is not None else None,
    )


@dataclass(frozen=True)
class Loaded:
    """The effective config of one repository and how it came about."""

    config: Config
    sources: dict[str, str]  # top-level key -> "default" | "user" | "repo"
    repo_layer: dict[str, Any]  # the repository layer as on disk (ignored keys included)
    version: int  # the repository layer's version
    trust: Trust


def user_layer(user_file: Path | None) -> tuple[dict[str, Any], dict[str, str], int]:
    """The user layer's settings (without trust records), its trust records, its version."""
    if user_file is None:
        return {}, {}, 0
    layer, version = split_document(read_raw(user_file))
    records = trust_records(layer, user_file)
    layer.pop(TRUST_KEY, None)
    return layer, records, version


def load(
    user_file: Path | None,
    repo_file: Path | None,
    repo_root: Path | None = None,
    *,
    records_apply: bool = True,
) -> Loaded:
    """The effective config; an untrusted repository layer only tightens it.

    ``repo_root`` names the repository in the trust records (default: the folder holding
    ``.pokeralph/``); ``records_apply=False`` weighs the layer as if nobody trusted it.
    """
    if repo_root is None and repo_file is not None:
        repo_root = repo_file.parent.parent
    user, records, _ = user_layer(user_file)
    user_rules = layer_rules(user, user_file)
    repo_raw = read_raw(repo_file) if repo_file is not None else {}
    repo_layer, version = split_document(repo_raw)
    refuse_user_only(repo_layer, repo_file)
    repo_rules = layer_rules(repo_layer, repo_file)
    trust = repo_trust(repo_raw, records if records_apply else {}, repo_root)
    # below: the defaults, then the user's layer (its rules in place of the defaults' none)
    data = default_layer()
    sources = dict.fromkeys(data, "default")
    data[RULES_KEY] = [r.dump() for r in user_rules or []]
    if user_rules is not None:
        sources[RULES_KEY] = "user"
    settings = {k: v for k, v in user.items() if k != RULES_KEY}
    if settings:
        data = merge(data, settings)
        sources.update(dict.fromkeys(settings, "user"))
    below = validate(data, user_file if settings else None)
    if not repo_layer:
        return Loaded(below, sources, repo_layer, version, trust)
    # full: the whole repository layer over that, its rules first
    data = merge(data, {k: v for k, v in repo_layer.items() if k != RULES_KEY})
    data[RULES_KEY] = [r.dump() for r in (repo_rules or []) + (user_rules or [])]
    full = validate(data, repo_file)
    # what applies is decided on the two models; the keys named are for the user
    config = full if trust.recorded else tightening.tighten(below, full)
    notify = tightening.quieter_notify(below.notify, config.notify)
    config = config.model_copy(update={"notify": notify})
    if trust.trusted:
        applied = layer_keys(repo_layer)
    else:
        trust = _weigh(trust, below, full)
        applied = [k for k in layer_keys(repo_layer) if not tightening.sensitive(k)]
        applied += trust.tightening_keys
    sources.update(dict.fromkeys((key.split(".")[0] for key in applied), "repo"))
    return Loaded(config, sources, repo_layer, version, trust)


def _weigh(trust: Trust, below: Config, full: Config) -> Trust:
    """``trust`` with its sensitive keys told apart: those that wait, those that apply
    because they only tighten (an approval rules list may be both: its deny rules apply,
    its allow rules wait)."""
    waiting: list[str] = []
    tight: list[str] = []
    low, high = below.dump(), full.dump()
    for key in trust.sensitive_keys:
        if key == RULES_KEY:
            added = tightening.added_rules(below, full)
            if any(rule.decision == "deny" for rule in added):
                tight.append(key)
            if any(rule.decision != "deny" for rule in added):
                waiting.append(key)
        else:
            (tight if tightening.applies(key, low, high) else waiting).append(key)
    return replace(trust, waiting=waiting, tightening=tight)


def layer_in_effect(loaded: Loaded, dotted: str) -> Literal["repo", "user"]:
    """The layer a new value of ``dotted`` must go to for it to apply: the repository's
    when that sets the key and is applied (not a sensitive key left out for want of
    trust), else the user's (which the repository layer then does not override)."""
    applied = without(loaded.repo_layer, loaded.trust.ignored_keys)
    return "repo" if lookup(applied, dotted)[0] else "user"
