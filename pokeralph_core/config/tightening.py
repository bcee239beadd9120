"""What a repository config nobody trusted may change: only what makes things stricter.

Pure: no I/O. A repository's ``.pokeralph/config.json`` comes with the repository (a
clone, a pull, an agent's edit); until the user trusts its content, it applies only where
it cannot loosen what the layers below it (the defaults, the user's) say. Each key falls
in one of four kinds, decided on validated :class:`~pokeralph_core.config.model.Config`
models (the layer below, and the layer below with the whole repository layer merged
over it), never on how a key is spelled:

- **Waits, whole subtree** (:data:`GATED`): ``agent``, ``roles`` and ``feedbackCommands``
  say what runs, with which arguments, where code, diffs and credentials go. No key in
  them is proved to only tighten, so none applies untrusted.
- **Ordered** (:data:`ORDERED`): a value applies untrusted when it is at least as strict
  as the one below, else it waits (and the one below applies):

  - ``permissions.unmatched``: ``allow`` < ``ask`` < ``deny``;
  - ``budget.*`` caps: a lower cap is stricter, and no cap (``null``) is the loosest, so
    a cap where the user set none applies, and unsetting one waits;
  - bounds on how long and how often agents run (``maxIterationsPerTask``, the
    ``*TimeoutMinutes``, ``maxVerificationCycles``, ``maxReviewCycles``,
    ``transientRetries``, ``parallelBattles``, ``permissions.askTimeoutMinutes``): lower
    is stricter. A repository may stop work sooner (the user sees it stop); only the
    user lets an agent run longer, more often or more at once on their machine and
    account. (An unanswered ask is denied, so a shorter ask timeout denies sooner.)
  - ``mode``: ``hitl`` (a person approves each iteration) is stricter than ``yolo``;
  - ``commitRuntimeFiles``: ``false`` is stricter (``.pokeralph/`` may hold secrets);
  - ``sandbox.mode``: ``off`` < ``auto`` < ``required``; ``sandbox.network.mode``:
    ``full`` < ``allowlist`` < ``none``; ``sandbox.network.allow`` and
    ``sandbox.filesystem.readOnly``/``readWrite``: a list is stricter when it names
    nothing the one below does not (fewer hosts, fewer paths). A repository may confine
    its runs more; only the user opens a host or a folder to them.
- **Quieter, trusted or not** (``notify``, issue 26): not a key trust decides on, since
  trust changes nothing here: whatever a repository layer sets only makes its own
  notifications quieter, even once trusted (:func:`quieter_notify`: a channel on only
  where the user has it on, the kinds both list, details only where both opt in); its
  layer may not
  name a webhook at all (a URL is the user's secret, and a webhook a repository chose
  would carry the user's notifications away: :mod:`.layers` refuses it).
- **Rules** (``approvalRules``): the layer's ``deny`` rules apply (a deny wins over any
  allow, so they only take power away); its ``allow`` rules wait.
- **Free**: everything else (``feedbackLoops``, ``phases``, ``autoCommit``,
  ``mergeStrategy``, intervals) applies as written: it changes what the battle does, not
  what an agent may do or spend.

:func:`tighten` builds the effective config from the two models; :func:`applies` says
whether one key a layer sets applies untrusted (for what ``config get`` and ``trust``
report).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralph_core.config.model import Config, NotifyConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralph_core.approval import ApprovalRule

#: Top-level keys whose whole subtree waits for trust.
GATED: tuple[str, ...] = ("agent", "roles", "feedbackCommands")

#: The approval rules: a deny rule applies untrusted, an allow rule waits.
RULES = "approvalRules"

UNMATCHED_ORDER = ("allow", "ask", "deny")  # loosest first


def _lower(below: Any, value: Any) -> bool:
    return bool(value <= below)


def _cap(below: Any, value: Any) -> bool:
    if value is None:  # no cap: the loosest
        return below is None
    return below is None or bool(value <= below)


def _unmatched(below: Any, value: Any) -> bool:
    return UNMATCHED_ORDER.index(value) >= UNMATCHED_ORDER.index(below)


def _hitl(below: Any, value: Any) -> bool:
    return bool(value == below or value == "hitl")


def _false(below: Any, value: Any) -> bool:
    return bool(value == below or value is False)


SANDBOX_ORDER = ("off", "auto", "required")  # loosest first
NETWORK_ORDER = ("full", "allowlist", "none")


def _sandbox(below: Any, value: Any) -> bool:
    return SANDBOX_ORDER.index(value) >= SANDBOX_ORDER.index(below)


def _network(below: Any, value: Any) -> bool:
    return NETWORK_ORDER.index(value) >= NETWORK_ORDER.index(below)


def _subset(below: Any, value: Any) -> bool:
    return set(value) <= set(below)


#: Dotted keys (camelCase, as in the file) with an order: ``ORDERED[key](below, value)``
#: says whether ``value`` is at least as strict as ``below`` (JSON values, as dumped).
ORDERED: dict[str, Callable[[Any, Any], bool]] = {
    "maxIterationsPerTask": _lower,
    "mode": _hitl,
    "timeoutMinutes": _lower,
    "feedbackTimeoutMinutes": _lower,
    "idleTimeoutMinutes": _lower,
    "commitRuntimeFiles": _false,
    "permissions.unmatched": _unmatched,
    "permissions.askTimeoutMinutes": _lower,
    "maxVerificationCycles": _lower,
    "maxReviewCycles": _lower,
    "transientRetries": _lower,
    "parallelBattles": _lower,
    "budget.perBattleUsd": _cap,
    "budget.perRepoPerDayUsd": _cap,
    "budget.perDayUsd": _cap,
    "sandbox.mode": _sandbox,
    "sandbox.network.mode": _network,
    "sandbox.network.allow": _subset,
    "sandbox.filesystem.readOnly": _subset,
    "sandbox.filesystem.readWrite": _subset,
}


def lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def _put(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        tree = tree[part]
    tree[last] = value


def _under(dotted: str, key: str) -> bool:
    """``dotted`` is ``key``, lies under it, or holds it."""
    return dotted == key or dotted.startswith(key + ".") or key.startswith(dotted + ".")


def sensitive(dotted: str) -> bool:
    """Whether a key a layer sets needs trust unless it only tightens (every key but the
    free ones)."""
    top = dotted.split(".")[0]
    return top in GATED or top == RULES or any(_under(dotted, key) for key in ORDERED)


def applies(dotted: str, low: dict[str, Any], high: dict[str, Any]) -> bool:
    """Whether the key ``dotted`` of an untrusted layer applies: free, or every ordered
    key it is, holds or lies under is at least as strict in ``high`` (the dumped config
    with the layer merged over ``low``) as in ``low`` (the one below, dumped). The rules
    are told apart one by one: :func:`added_rules`."""
    top = dotted.split(".")[0]
    if top in GATED or top == RULES:
        return False
    return all(
        stricter(lookup(low, key), lookup(high, key))
        for key, stricter in ORDERED.items()
        if _under(dotted, key)
    )


def added_rules(below: Config, full: Config) -> list[ApprovalRule]:
    """The repository layer's rules: those of ``full`` before the ones ``below`` holds."""
    return full.approval_rules[: len(full.approval_rules) - len(below.approval_rules)]


def tighten(below: Config, full: Config) -> Config:
    """The effective config of an untrusted layer: ``full`` (``below`` with the whole
    layer merged over it, rules concatenated repository first), less what would loosen
    ``below``."""
    low, out = below.dump(), full.dump()
    for key in GATED:
        out[key] = low[key]
    for key, stricter in ORDERED.items():
        if not stricter(lookup(low, key), lookup(out, key)):
            _put(out, key, lookup(low, key))
    # the rules were validated already (each on its own, and in both configs)
    denied = [rule for rule in added_rules(below, full) if rule.decision == "deny"]
    out[RULES] = []
    config = Config.model_validate(out, by_alias=True, by_name=False)
    return config.model_copy(update={"approval_rules": denied + below.approval_rules})


def quieter_notify(below: NotifyConfig, full: NotifyConfig) -> NotifyConfig:
    """``full``'s notifications (a repository layer merged over ``below``, trusted or
    not), kept no louder than ``below``'s: a channel on only where both have it, the kinds
    both list, details only where both opt in, and ``below``'s webhooks (a repository
    names none)."""
    return NotifyConfig(
        desktop=below.desktop and full.desktop,
        webhooks=below.webhooks,
        events=[kind for kind in below.events if kind in full.events],
        include_details=below.include_details and full.include_details,
    )
