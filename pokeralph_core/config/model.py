"""A repository's configuration: the ``Config`` document people edit (layered: defaults,
the user's layer, the repository's ``.pokeralph/config.json``), with its agent, roles,
permissions, budget, notifications and sandbox, every field bounded and validated; and
:class:`ExecutionMode`, its ``mode``, which each battle then carries.

The data-model seed's Config, with "ours" extensions (backends, feedback commands,
phases, approval rules, caps); camelCase on disk through :class:`Model`. How layers
merge and which keys an untrusted layer may set is :mod:`pokeralph_core.config.layers`
and :mod:`pokeralph_core.config.tightening`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from pokeralph_core.approval import RULES_MAX, ApprovalRule
from pokeralph_core.config.sandbox import SandboxConfig
from pokeralph_core.local_config import LocalAgentConfig
from pokeralph_core.model_base import Model

LOOP_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,39}$"
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
LoopName = Annotated[str, StringConstraints(pattern=LOOP_NAME_RE)]


# hitl: a person approves each iteration; yolo: iterations run on. (No docstring: it
# would become the description of ExecutionMode in the generated contract.)
class ExecutionMode(StrEnum):
    HITL = "hitl"
    YOLO = "yolo"


#: ``acp`` is any Agent Client Protocol agent (``agent.command``); ``gemini``, ``opencode``
#: and ``qwen`` are ACP agents by name (see pokeralphd.agents.acp_presets).
AgentBackendName = Literal[
    "claude", "codex", "command", "demo", "local", "acp", "gemini", "opencode", "qwen"
]


class AgentConfig(Model):
    """Which agent backend runs iterations, and how (ours)."""

    backend: AgentBackendName = "claude"
    command: str | None = Field(default=None, description="Executable; default per backend")
    model: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    prompt_via: Literal["stdin", "argument"] = "stdin"
    local: LocalAgentConfig = Field(default_factory=LocalAgentConfig)


class BudgetConfig(Model):
    """Spending caps in USD (ours): a battle that would pass one pauses before its next
    agent run, with the reason, an event and an inbox item to raise the cap or stop."""

    per_battle_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    per_repo_per_day_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    per_day_usd: float | None = Field(
        default=None, gt=0, le=1_000_000, description="every repository together, per UTC day"
    )


class Roles(Model):
    """Which agent plays each role beside the implementer (seed 003's QA and reviewer);
    unset, a role runs on the battle's own ``agent`` (ours)."""

    verifier: AgentConfig | None = None
    reviewer: AgentConfig | None = None


#: A battle's phases after planning (seed 003): the release phase is our commit.
Phase = Literal["implementation", "verification", "review"]
PHASE_ORDER: tuple[Phase, ...] = ("implementation", "verification", "review")
DEFAULT_PHASES: tuple[Phase, ...] = ("implementation", "verification")
#: Where a battle is: one of its phases, or ``done`` once every phase passed.
BattlePhase = Literal["implementation", "verification", "review", "done"]


class PermissionPolicy(Model):
    """What happens to a tool call no approval rule decides (ours)."""

    unmatched: Literal["ask", "deny", "allow"] = Field(
        default="ask",
        description="ask: a blocking inbox item (deny when unanswered in time); deny; or "
        "allow (an explicit opt-in to let the agent run anything)",
    )
    ask_timeout_minutes: float = Field(default=30, gt=0, le=24 * 60)


#: What may notify a person (issue 26): an inbox item waiting for an answer, a battle
#: complete, failed, escalated, over budget, cancelled, or its merge back refused.
NotifyKind = Literal[
    "waiting", "complete", "failed", "escalated", "budget", "cancelled", "merge_failed"
]
DEFAULT_NOTIFY_KINDS: tuple[NotifyKind, ...] = (
    "waiting",
    "complete",
    "failed",
    "escalated",
    "budget",
)
WebhookFormat = Literal["json", "ntfy", "slack", "discord"]
CHANNEL_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,39}$"
WEBHOOKS_MAX = 10


def _webhook_url(url: str) -> str:
    # The message never repeats the URL: it is a secret (it may name a private topic or
    # carry a token), and errors are shown and logged.
    if len(url) > 2048 or not re.fullmatch(r"https?://[^\s/?#@]*@?[^\s/?#]+[^\s]*", url):
        raise ValueError("must be an http:// or https:// URL (at most 2048 characters)")
    try:
        host = urlsplit(url).hostname
    except ValueError:
        host = None
    if not host:
        raise ValueError("must be an http:// or https:// URL that names a host")
    return url


class Webhook(Model):
    """One webhook channel: where to POST and in which service's format (ours). Its URL
    is a secret: only the user's config may hold it, and it is shown redacted."""

    url: Annotated[str, AfterValidator(_webhook_url)]
    format: WebhookFormat = Field(
        default="json",
        description="json (a generic JSON POST), ntfy, slack or discord",
    )
    events: list[NotifyKind] | None = Field(
        default=None, description="the kinds sent to this webhook (default: notify.events)"
    )
    name: str | None = Field(
        default=None,
        pattern=CHANNEL_NAME_RE,
        description="what `pokeralphctl notify test` calls it (default: webhook1, webhook2…)",
    )


class NotifyConfig(Model):
    """Channels that find a person when a battle needs them (ours, issue 26). Set in the
    user's config; a repository's may only make its own notifications quieter."""

    desktop: StrictBool = Field(
        default=False, description="desktop notifications (D-Bus on Linux, osascript on macOS)"
    )
    webhooks: list[Webhook] = Field(default_factory=list, max_length=WEBHOOKS_MAX)
    events: list[NotifyKind] = Field(
        default_factory=lambda: list(DEFAULT_NOTIFY_KINDS),
        description="the kinds that notify at all; a webhook's events narrow them",
    )
    include_details: StrictBool = Field(
        default=False,
        description="add an error or an inbox item's text to a notification (else titles "
        "and links only)",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> NotifyConfig:
        names = [hook.name for hook in self.webhooks if hook.name is not None]
        if "desktop" in names:
            raise ValueError("a webhook may not be named desktop")
        if len(set(names)) != len(names):
            raise ValueError("webhook names must be unique")
        return self


class Config(Model):
    """``.pokeralph/config.json``: what controls battle execution (seed ``Config``)."""

    max_iterations_per_task: StrictInt = Field(default=10, gt=0, le=100)
    mode: ExecutionMode = ExecutionMode.HITL
    feedback_loops: list[LoopName] = Field(
        default_factory=lambda: ["test", "lint", "typecheck"], min_length=1
    )
    timeout_minutes: float = Field(default=30, gt=0, le=60)
    polling_interval_ms: StrictInt = Field(default=2000, ge=500, le=10000)
    auto_commit: StrictBool = True
    # ours
    agent: AgentConfig = Field(default_factory=AgentConfig)
    feedback_commands: dict[LoopName, NonEmptyStr] = Field(default_factory=dict)
    feedback_timeout_minutes: float = Field(default=10, gt=0, le=60)
    idle_timeout_minutes: float = Field(default=10, gt=0, le=60)
    commit_runtime_files: StrictBool = False
    output_coalesce_ms: StrictInt = Field(default=10, ge=0, le=1000)
    # the repository's rules, then the user's (each layer's list checked on its own)
    approval_rules: list[ApprovalRule] = Field(default_factory=list, max_length=2 * RULES_MAX)
    permissions: PermissionPolicy = Field(default_factory=PermissionPolicy)
    # seed 003: the phases a battle goes through, who plays each role, the bounded loops
    phases: list[Phase] = Field(
        default_factory=lambda: list(DEFAULT_PHASES),
        description="implementation, then verification and review when listed (in order)",
    )
    roles: Roles = Field(default_factory=Roles)
    max_verification_cycles: StrictInt = Field(default=3, ge=1, le=10)
    max_review_cycles: StrictInt = Field(default=2, ge=1, le=10)
    transient_retries: StrictInt = Field(
        default=4, ge=0, le=20, description="retries of a transient failure before escalating"
    )
    # issue 14: battles of one repository at once, each in its own git worktree when > 1
    parallel_battles: StrictInt = Field(
        default=1,
        ge=1,
        le=16,
        description="battles of this repository at once; above 1 each runs in its own "
        "git worktree on a branch pokeralph/{taskId}, merged back when it completes",
    )
    merge_strategy: Literal["ff", "rebase"] = Field(
        default="rebase",
        description="how a worktree battle's branch is merged back: ff (fast-forward "
        "only), rebase (onto the branch first when it moved, then fast-forward)",
    )
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    # issue 23: where a battle's processes run and what they may touch
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @field_validator("phases")
    @classmethod
    def _phase_order(cls, phases: list[str]) -> list[str]:
        if not phases or phases[0] != "implementation":
            raise ValueError("phases must start with implementation")
        if len(set(phases)) != len(phases):
            raise ValueError("phases must be unique")
        if phases != sorted(phases, key=PHASE_ORDER.index):
            raise ValueError("phases run in the order implementation, verification, review")
        return phases

    def role_agent(self, role: Literal["verifier", "reviewer"]) -> AgentConfig:
        """The agent that plays ``role``: its own, else the battle's."""
        own = self.roles.verifier if role == "verifier" else self.roles.reviewer
        return own or self.agent

    @field_validator("feedback_loops")
    @classmethod
    def _unique_loops(cls, loops: list[str]) -> list[str]:
        if len(set(loops)) != len(loops):
            raise ValueError("feedback loop names must be unique")
        return loops
