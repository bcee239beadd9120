"""Approval rules and their matching: which tool calls an agent may make without asking.

Pure: no I/O, no asyncio. A rule (seed 001's ``ApprovalRule``) names a tool and a regular
expression over the tool's input written as canonical JSON (:func:`canonical`: keys
sorted, no spaces, UTF-8 kept). :func:`decide` finds the rules that match a call: a
``deny`` rule wins over any ``allow`` rule, and no match at all leaves the decision to the
policy (a person, through the inbox).

**Matching is** a search (the ``regex`` package, whose syntax is :mod:`re`'s): a pattern
matches anywhere in the canonical JSON unless it anchors itself, so ``^`` and ``$`` mean
what they say (the seed's example ``^{"path":".*\\.txt"}$`` matches the whole input;
``rm -rf`` matches any input that contains it). Write anchored patterns for ``allow``
rules. ``regex`` rather than :mod:`re` for what :mod:`re` cannot do: stop a search after
a deadline, and search without holding the GIL, so a pattern that backtracks
(``(a|aa)+$`` on forty ``a`` and a ``!``) cannot freeze the daemon (which decides in a
worker thread: its loop goes on meanwhile).

**What no rule decides.** An input longer than :data:`INPUT_MAX` is denied, before any
rule: too large to match and too large for a person to review, so no allow rule and no
policy may let it through. Matching a call against the rules gets :data:`MATCH_SECONDS`
in all; a rule still searching then denies the call, naming the rule: it might have been
a deny rule, and asking a person instead would hand them a decision a rule was meant to
take, or, with ``permissions.unmatched: allow``, nobody (fail closed, and loudly, so the
rule gets fixed).

**Validation** (:class:`ApprovalRule`) refuses what cannot be meant: a pattern that does
not compile, an empty description, a tool no backend has (Claude Code's tools, any
``mcp__server__tool``, the local agent's catalog, an ACP tool call's kind), a pattern that takes longer than
:data:`PROBE_SECONDS` over the probe inputs of its tool (:func:`probes`, a few dozen short
inputs: it backtracks), and a *blanket* allow rule: one whose pattern matches every probe
input of its tool, so it would approve everything. A blanket ``deny`` rule ("never WebFetch") is allowed: it only takes power
away. Lengths and the number of rules are bounded.

Ids: the daemon writes an ``id`` into each rule it adds; a rule written by hand without
one gets :func:`rule_id`, a short hash of its tool, pattern and decision, so its id is
stable across restarts, and a hand edit of a daemon-written rule keeps its id (and its
usage, kept in a separate state file: :class:`ApprovalUsage`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import regex
from pydantic import (
    Field,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pokeralph_core.model_base import Model
from pokeralph_core.timeutil import Timestamp

if TYPE_CHECKING:
    from collections.abc import Sequence

RuleDecision = Literal["allow", "deny"]
RuleSource = Literal["repo", "user"]

# -- limits
PATTERN_MAX = 1000  # characters of a paramPattern
DESCRIPTION_MAX = 500  # characters of a description
TOOL_NAME_MAX = 128  # characters of a tool name
RULES_MAX = 200  # rules per config layer (the effective list holds at most twice that)
INPUT_MAX = 256 * 1024  # characters of canonical JSON a call may have: longer is denied
MATCH_SECONDS = 0.5  # matching one call against every rule: past it the call is denied
PROBE_SECONDS = 0.5  # a pattern over its tool's probe inputs, when it is validated
RULE_ID_RE = r"^[A-Za-z0-9_-]{1,64}$"

#: Claude Code's built-in tools (its permission prompts name these).
CLAUDE_TOOLS = frozenset(
    {
        "Bash",
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "Glob",
        "Grep",
        "LS",
        "WebFetch",
        "WebSearch",
        "Task",
        "TodoWrite",
    }
)
#: The local agent's tool catalog (seed 001).
LOCAL_TOOLS = frozenset(
    {
        "create_file",
        "read_file",
        "replace_string_in_file",
        "list_dir",
        "file_search",
        "grep_search",
        "run_in_terminal",
        "terminal_last_command",
        "create_directory",
        "fetch_webpage",
    }
)
#: A confined run's connection to a host not on sandbox.network.allow (issue 23): its
#: input is ``{"host": …, "port": …}``.
NETWORK_TOOL = "network"
#: The kinds of an Agent Client Protocol tool call (an ACP agent's permission requests
#: name these: its rules match the kind, their pattern the call's ``rawInput``).
ACP_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"}
)
MCP_TOOL_RE = re.compile(r"mcp__[A-Za-z0-9_-]+?__[A-Za-z0-9_-]+")

#: The string parameters each known tool takes (what its inputs look like), for probing.
TOOL_KEYS: dict[str, tuple[str, ...]] = {
    "Bash": ("command", "description"),
    "Read": ("file_path",),
    "Write": ("file_path", "content"),
    "Edit": ("file_path", "old_string", "new_string"),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path", "new_source"),
    "Glob": ("pattern", "path"),
    "Grep": ("pattern", "path", "glob"),
    "LS": ("path",),
    "WebFetch": ("url", "prompt"),
    "WebSearch": ("query",),
    "Task": ("description", "prompt", "subagent_type"),
    "TodoWrite": ("todos",),
    "create_file": ("path", "content"),
    "read_file": ("path",),
    "replace_string_in_file": ("path", "old_string", "new_string"),
    "list_dir": ("path",),
    "file_search": ("pattern",),
    "grep_search": ("query", "pattern", "path"),
    "run_in_terminal": ("command",),
    "terminal_last_command": (),
    "create_directory": ("path",),
    "fetch_webpage": ("url",),
    NETWORK_TOOL: ("host",),
}
GENERIC_KEYS = ("command", "path", "file_path", "url", "query", "content", "input")


def known_tool(name: str) -> bool:
    return (
        name in CLAUDE_TOOLS
        or name in LOCAL_TOOLS
        or name == NETWORK_TOOL
        or name in ACP_KINDS
        or bool(MCP_TOOL_RE.fullmatch(name))
    )


def canonical(value: Any) -> str:
    """A tool input as rules see it: JSON with sorted keys, no spaces, non-ASCII kept.

    Raises :class:`ValueError` for what JSON cannot hold (NaN, infinities, non-string keys
    of other types than JSON's own coercions).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def rule_id(tool_name: str, param_pattern: str, decision: str) -> str:
    """A rule's stable id: ``r-`` and 12 hex digits of a hash of what it decides."""
    text = "\0".join((tool_name, param_pattern, decision))
    return "r-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@functools.lru_cache(maxsize=2048)
def compiled(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern (raises :class:`regex.error`)."""
    return regex.compile(pattern)


def _probe_strings() -> tuple[str, ...]:
    rng = random.Random(1)  # fixed: the same probes on every run
    alphabet = "abcxyz019 ./-_*?\"'\\\n\t{}[]:,éü€😀"
    randoms = tuple(
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(6)
    )
    return (
        "",
        "x",
        "a.txt",
        "/etc/passwd",
        "rm -rf /",
        "https://example.com/",
        'ünï "quoted"\nline',
        "z" * 300,
        *randoms,
    )


PROBE_STRINGS = _probe_strings()


@functools.lru_cache(maxsize=256)
def probes(tool_name: str) -> tuple[str, ...]:
    """Canonical JSON of inputs a call of ``tool_name`` could have, as different from each
    other as a few dozen can be: a pattern matching all of them approves anything.

    A known tool's probes are well-formed inputs of it: its first parameter (the one
    every call has) alone and all of its parameters at once, with each probe string; an
    unknown one (an MCP tool) gets ``{}`` and objects of common keys. Inputs are always
    JSON objects, so a pattern like ``^\\{`` is a blanket too."""
    keys = TOOL_KEYS.get(tool_name)
    values: list[Any] = []
    if keys == ():
        values.append({})
    elif keys:
        for text in PROBE_STRINGS:
            values += [{keys[0]: text}, dict.fromkeys(keys, text)]
    else:
        values.append({})
        for text in PROBE_STRINGS:
            values += [{key: text} for key in GENERIC_KEYS]
    return tuple(dict.fromkeys(canonical(v) for v in values))


@functools.lru_cache(maxsize=4096)
def is_blanket(tool_name: str, pattern: str) -> bool:
    """Whether ``pattern`` matches every probe input of ``tool_name``.

    Raises :class:`TimeoutError` when the probes take longer than :data:`PROBE_SECONDS`
    (short inputs: the pattern backtracks)."""
    return all(probe_matches(tool_name, pattern))


def probe_matches(tool_name: str, pattern: str) -> list[bool]:
    """Whether ``pattern`` matches each probe input of ``tool_name``, within
    :data:`PROBE_SECONDS` in all (else :class:`TimeoutError`)."""
    search = compiled(pattern).search
    deadline = time.monotonic() + PROBE_SECONDS
    found = []
    for text in probes(tool_name):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        found.append(search(text, timeout=left) is not None)
    return found


ToolName = Annotated[str, StringConstraints(min_length=1, max_length=TOOL_NAME_MAX)]
RuleId = Annotated[str, StringConstraints(pattern=RULE_ID_RE)]


class ApprovalRule(Model):
    """One rule as a config layer holds it (``approvalRules[i]``).

    Usage (``lastUsedAt``, ``useCount``) is not part of it: the daemon keeps that in
    :class:`ApprovalUsage`, so the config files people edit do not change on every use.
    Field order matters for validation: ``decision`` is checked before ``paramPattern``.
    """

    id: RuleId
    tool_name: ToolName
    decision: RuleDecision
    param_pattern: Annotated[str, StringConstraints(min_length=1, max_length=PATTERN_MAX)]
    description: Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX)]
    created_at: Timestamp | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_id(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("id") is not None:
            return data
        parts = [
            data.get(camel, data.get(snake))
            for camel, snake in (
                ("toolName", "tool_name"),
                ("paramPattern", "param_pattern"),
                ("decision", "decision"),
            )
        ]
        tool, pattern, decision = parts
        if isinstance(tool, str) and isinstance(pattern, str) and isinstance(decision, str):
            return {**data, "id": rule_id(tool, pattern, decision)}
        return data  # the missing field is reported by its own validation

    @field_validator("tool_name")
    @classmethod
    def _known_tool(cls, name: str) -> str:
        if not known_tool(name):
            raise ValueError(
                f"unknown tool {name!r}: use one of Claude Code's tools "
                f"({', '.join(sorted(CLAUDE_TOOLS))}), an MCP tool (mcp__server__tool) or "
                f"one of the local agent's ({', '.join(sorted(LOCAL_TOOLS))}), an ACP tool "
                f"kind ({', '.join(sorted(ACP_KINDS))}), or {NETWORK_TOOL}"
                " (a sandboxed run's connection: {host, port})"
            )
        return name

    @field_validator("description")
    @classmethod
    def _described(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("description must say what the rule allows or denies")
        return text

    @field_validator("param_pattern")
    @classmethod
    def _pattern(cls, pattern: str, info: ValidationInfo) -> str:
        tool = info.data.get("tool_name")
        who = f"rule for {tool}" if tool else "rule"
        try:
            compiled(pattern)
        except regex.error as exc:
            raise ValueError(f"{who}: paramPattern is not a valid regex: {exc}") from None
        if not tool:
            return pattern
        try:
            blanket = is_blanket(tool, pattern)
        except TimeoutError:
            raise ValueError(
                f"{who}: paramPattern {pattern!r} takes more than {PROBE_SECONDS:g} s over a "
                "few short inputs (it backtracks, like (a|aa)+$): write it without nested "
                "or overlapping repetition"
            ) from None
        if blanket and info.data.get("decision") == "allow":
            raise ValueError(
                f"{who}: paramPattern {pattern!r} matches every input of {tool} "
                "(a blanket approval): anchor it (^...$) and name what it allows"
            )
        return pattern

    def matches(self, text: str, timeout: float | None = None) -> bool:
        """Whether the rule's pattern matches a canonical input (a search); past
        ``timeout`` seconds, :class:`TimeoutError`."""
        search = compiled(self.param_pattern).search
        return search(text, concurrent=True, timeout=timeout) is not None


class RuleUsage(Model):
    """How often a rule decided a call, and when it last did."""

    last_used_at: Timestamp | None = None
    use_count: StrictInt = Field(default=0, ge=0)


class ApprovalUsage(Model):
    """The daemon's usage state of one layer's rules (``approval-usage.json``), by rule id."""

    rules: dict[RuleId, RuleUsage] = Field(default_factory=dict)


class RuleError(ValueError):
    """A rule list that cannot be used; names the rule by index and tool."""

    def __init__(self, index: int, tool: str | None, field: str, message: str) -> None:
        self.index = index
        self.tool = tool
        self.field = f"approvalRules[{index}]" + (f".{field}" if field else "")
        who = f"approvalRules[{index}]" + (f" ({tool})" if tool else "")
        self.message = f"{who}: {message}"
        super().__init__(self.message)


def check_rules(rules: Sequence[ApprovalRule]) -> None:
    """What a single rule cannot check: the list's length and that its ids are unique."""
    if len(rules) > RULES_MAX:
        raise RuleError(RULES_MAX, None, "", f"at most {RULES_MAX} rules per config layer")
    seen: dict[str, int] = {}
    for index, rule in enumerate(rules):
        if rule.id in seen:
            raise RuleError(
                index,
                rule.tool_name,
                "id",
                f"id {rule.id!r} is also the id of approvalRules[{seen[rule.id]}]: "
                "give one of them another id (or remove the id to derive one)",
            )
        seen[rule.id] = index


Limit = Literal["too_large", "too_slow"]


@dataclass(frozen=True)
class Decision:
    """What the rules say about one call: ``decision`` is ``None`` when no rule matched
    (the policy decides); ``rule`` and ``index`` (into the rules given) name the rule.
    ``limit`` says when a limit decided instead (always a denial): ``too_large`` (no
    rule), ``too_slow`` (the rule being searched when time ran out)."""

    decision: RuleDecision | None
    rule: ApprovalRule | None
    index: int | None
    reason: str
    canonical_input: str
    limit: Limit | None = None


def _describe(rule: ApprovalRule) -> str:
    return f"{rule.decision} rule {rule.id} ({rule.tool_name} {rule.param_pattern!r}: {rule.description})"


def decide(
    rules: Sequence[ApprovalRule], tool: str, tool_input: Any, seconds: float = MATCH_SECONDS
) -> Decision:
    """Which rule decides a call of ``tool`` with ``tool_input``, and why.

    A matching ``deny`` rule wins over every ``allow`` rule; among rules of one kind the
    first in order wins (the repository's rules come before the user's). No match gives
    ``decision=None``: the policy decides. An input longer than :data:`INPUT_MAX` is
    denied before any rule; so is one the rules could not be matched against within
    ``seconds`` (:data:`MATCH_SECONDS`).
    """
    try:
        text = canonical(tool_input)
    except (TypeError, ValueError) as exc:
        return Decision(None, None, None, f"input is not JSON ({exc}): the policy decides", "")
    if len(text) > INPUT_MAX:
        return Decision(
            "deny",
            None,
            None,
            f"denied: the input is {len(text):,} characters as JSON, too large to approve "
            f"(at most {INPUT_MAX:,}: no rule, policy or person is asked)",
            text[:INPUT_MAX],
            "too_large",
        )
    deadline = time.monotonic() + seconds
    allow: tuple[int, ApprovalRule] | None = None
    for index, rule in enumerate(rules):
        if rule.tool_name != tool:
            continue
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not rule.matches(text, timeout=left):
                continue
        except TimeoutError:
            return Decision(
                "deny",
                rule,
                index,
                f"denied: matching the rules took too long (more than {seconds:g} s, "
                f"stopped in {_describe(rule)}); a pattern that backtracks decides nothing "
                "else: fix or remove it",
                text,
                "too_slow",
            )
        if rule.decision == "deny":
            reason = _describe(rule)
            if allow is not None:
                reason += f"; deny wins over {_describe(allow[1])}"
            return Decision("deny", rule, index, reason, text)
        if allow is None:
            allow = (index, rule)
    if allow is not None:
        return Decision("allow", allow[1], allow[0], _describe(allow[1]), text)
    return Decision(None, None, None, f"no rule for {tool} matches: the policy decides", text)
