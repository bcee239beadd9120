"""PermissionRouter: the answer to one iteration's permission requests.

An agent whose backend routes permissions (Claude Code, over its stdio control channel)
asks before a tool runs. The router answers:

0. an input too large to approve (:data:`~pokeralph_core.approval.INPUT_MAX`) is denied
   at once (method ``limit``), whatever rule or policy would allow it;
1. by the approval rules (``approvalRules``, the repository's then the user's): a deny
   rule wins over an allow rule; the rule's use is counted durably; a rule whose pattern
   is still searching after the matching deadline denies the call;
2. else by the policy ``permissions.unmatched``: ``ask`` (the default) puts a blocking
   inbox item in front of a person (allow, allow always, deny; a note goes back to the
   model with a denial) and denies when nobody answers within
   ``permissions.askTimeoutMinutes``; ``deny``; or ``allow`` (an explicit opt-in).

Each request and decision is an event (``permission_requested``,
``permission_decided``). A person, and every event, sees the input through
:func:`pokeralph_core.input_view.view`: its full length, its head and its tail with
where it was cut, nothing invisible; the model's own description of the call is shown
the same way in a block of its own, where it cannot pass for the item's text. "Allow always" also adds a repository rule matching exactly this
input (the person can widen it with ``pokeralphctl rules``).
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING

import anyio

from pokeralph_core.approval import NETWORK_TOOL, ApprovalRule, canonical
from pokeralph_core.input_view import InputView, code_block, code_span, json_text, view
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import AgentPermissionRequest, ApprovalMethod, PermissionAnswer
from pokeralphd.clock import wait_or_timeout
from pokeralphd.domain.inbox import Source
from pokeralphd.errors import PokeralphError
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralph_core.approval import Decision
    from pokeralph_core.config.model import Config, PermissionPolicy
    from pokeralphd.domain.inbox import Delivery, Feedback
    from pokeralphd.ports import Clock, Inbox
    from pokeralphd.store.repo_store import RepoStore
    from pokeralphd.store.rules import EffectiveRule

log = logging.getLogger(__name__)
DESCRIPTION_SHOWN = 1000  # characters of the model's description of a call shown
# How each way of deciding maps to seed 001's approval method (a person, a rule, or
# automatically: the policy, or the ask's time running out).
APPROVAL_METHODS: dict[str, ApprovalMethod] = {
    "config_rule": "config_rule",
    "manual": "manual",
    "policy": "auto",
    "timeout": "auto",
    "limit": "auto",
}
ALLOW, ALWAYS, DENY = "allow", "allow_always", "deny"


class PermissionRouter:
    def __init__(
        self,
        repo: RepoStore,
        inbox: Inbox,
        clock: Clock,
        policy: PermissionPolicy,
        task_id: str,
        iteration: int,
        title: str,
        publish: Callable[[ev.TaskEvent], None],
    ) -> None:
        self.repo = repo
        self.inbox = inbox
        self.clock = clock
        self.policy = policy
        self.task_id = task_id
        self.iteration = iteration
        self.title = title
        self.publish = publish

    async def __call__(self, ask: AgentPermissionRequest) -> PermissionAnswer:
        shown = view(json_text(ask.input))
        described = view(json_text(ask.description), DESCRIPTION_SHOWN)
        self.publish(
            ev.PermissionRequested(
                task_id=self.task_id,
                iteration=self.iteration,
                request_id=ask.request_id,
                tool=ask.tool_name,
                input=shown.text,
                input_length=shown.length,
                description=described.text if ask.description else "",
            )
        )
        rules = await self.repo.rules()
        # off the loop: a search stops at its deadline, and the loop goes on meanwhile
        decision, effective = await anyio.to_thread.run_sync(rules.decide, ask.tool_name, ask.input)
        if decision.limit == "too_large":
            return self._decided(ask, False, "limit", decision.reason)
        if decision.decision is not None and effective is not None:
            return await self._by_rule(ask, decision, effective)
        unmatched = self.policy.unmatched
        if unmatched == "allow":
            return self._decided(ask, True, "policy", None)
        if unmatched == "deny":
            return self._decided(
                ask,
                False,
                "policy",
                f"no approval rule allows {ask.tool_name} here, and unmatched calls are "
                "denied (permissions.unmatched); ask the user to add a rule",
            )
        return await self._ask_a_person(ask, shown, described)

    async def _by_rule(
        self, ask: AgentPermissionRequest, decision: Decision, effective: EffectiveRule
    ) -> PermissionAnswer:
        rule = effective.rule
        if decision.limit == "too_slow":  # the rule did not decide: its use is not counted
            return self._decided(ask, False, "config_rule", decision.reason, rule_id=rule.id)
        try:
            await self.repo.record_rule_use(effective.source, rule.id)
        except PokeralphError as exc:  # counting must not change the decision
            log.warning("could not count a use of rule %s: %s", rule.id, exc.message)
        allowed = decision.decision == "allow"
        message = None if allowed else f"denied by rule {rule.id}: {rule.description}"
        return self._decided(ask, allowed, "config_rule", message, rule_id=rule.id)

    def _decided(
        self,
        ask: AgentPermissionRequest,
        allowed: bool,
        method: ev.DecisionMethod,
        message: str | None,
        *,
        rule_id: str | None = None,
        delivery_id: str | None = None,
    ) -> PermissionAnswer:
        self.publish(
            ev.PermissionDecided(
                task_id=self.task_id,
                iteration=self.iteration,
                request_id=ask.request_id,
                tool=ask.tool_name,
                allowed=allowed,
                method=method,
                rule_id=rule_id,
                message=message,
                delivery_id=delivery_id,
            )
        )
        return PermissionAnswer(
            allowed,
            message or "",
            method=APPROVAL_METHODS[method],
            rule_id=rule_id,
        )

    async def _ask_a_person(
        self, ask: AgentPermissionRequest, shown: InputView, described: InputView
    ) -> PermissionAnswer:
        answered = anyio.Event()
        answer: list[Feedback] = []

        async def on_answer(_delivery: Delivery, feedback: Feedback) -> None:
            answer.append(feedback)
            answered.set()

        minutes = self.policy.ask_timeout_minutes
        title = f"May {self.task_id} run {ask.tool_name}?"
        if ask.tool_name == NETWORK_TOOL:
            where = f"{ask.input.get('host')}:{ask.input.get('port')}"
            title = f"May {self.task_id} connect to {where}?"
        delivery = await self.inbox.create(
            title,
            item_body(
                f"{code_span(self.task_id)}: {code_span(self.title)}",
                self.iteration,
                self.repo.name,
                ask.tool_name,
                shown,
                described if ask.description else None,
                minutes,
            ),
            "blocking",
            {"type": "select", "prompt": "Allow this tool call?", "options": [ALLOW, ALWAYS, DENY]},
            Source(kind="permission", task_id=self.task_id, iteration=self.iteration),
            on_answer=on_answer,
        )
        try:
            if not await wait_or_timeout(answered, self.clock, minutes * 60):
                message = f"nobody answered within {minutes:g} minutes: denied"
                with anyio.CancelScope(shield=True):
                    await self.inbox.close(delivery.id, message)
                return self._decided(ask, False, "timeout", message, delivery_id=delivery.id)
        except BaseException:
            with anyio.CancelScope(shield=True):  # cancelled (pause now, cancel): tidy up
                with contextlib.suppress(PokeralphError):
                    await self.inbox.close(delivery.id, "the iteration stopped")
            raise
        feedback = answer[0]
        choice = feedback.values.get("value")
        note = (feedback.note or "").strip()
        if choice == DENY:
            message = "denied by the user" + (f": {note}" if note else "")
            return self._decided(ask, False, "manual", message, delivery_id=delivery.id)
        rule_id = None
        if choice == ALWAYS:
            rule_id = await self._add_rule(ask)
        return self._decided(
            ask, True, "manual", note or None, rule_id=rule_id, delivery_id=delivery.id
        )

    async def _add_rule(self, ask: AgentPermissionRequest) -> str | None:
        """A repository rule allowing exactly this input (the person may widen it)."""
        try:
            rule = ApprovalRule.model_validate(
                {
                    "toolName": ask.tool_name,
                    "paramPattern": "^" + re.escape(canonical(ask.input)) + "$",
                    "description": f"allowed always from the inbox ({self.task_id})",
                    "decision": "allow",
                }
            )
            added = await self.repo.add_rule(rule, "repo")
        except ValueError as exc:  # an input too long for a pattern, a tool we don't know
            log.warning("allow-always rule not made: %s", exc)
            return None
        except PokeralphError as exc:  # an untrusted repository layer
            log.warning("allow-always rule not added: %s", exc.message)
            return None
        return added.rule.id


def item_body(
    task: str,
    iteration: int,
    repo: str,
    tool: str,
    shown: InputView,
    described: InputView | None,
    minutes: float,
) -> str:
    """A permission item's Markdown: what the daemon says in its own words, the input and
    the model's description each in a block that nothing in them can close (``task`` is
    Markdown already: the task's id and title as code spans)."""
    cut = (
        "all of it shown"
        if shown.cut is None
        else "cut: its beginning and its end are shown, and where the rest was"
    )
    lines = [
        f"**{task}**, iteration {iteration}, in {code_span(repo)}",
        "",
        f"The agent asks to run **{code_span(tool)}** with this input, {shown.length:,} "
        f"characters as JSON ({cut}):",
        "",
        code_block(shown),
        *(["", "; ".join(shown.legend) + "."] if shown.legend else []),
    ]
    if described is not None:
        lines += [
            "",
            "The agent describes it so (its own words, as a JSON string, not checked against "
            f"the input; {described.summary}):",
            "",
            code_block(described),
        ]
    lines += [
        "",
        "Allow it once, allow it always (a rule for exactly this input), or deny it; a note "
        f"goes to the agent with a denial. Unanswered in {minutes:g} minutes, it is denied.",
    ]
    return "\n".join(lines)


def policy_warnings(config: Config) -> list[str]:
    """What a person should know about a battle's permissions before trusting it."""
    backend = get_backend(config.agent)
    warnings = []
    if not backend.can_route(config.agent):
        warnings.append(
            f"{backend.unrouted(config.agent)} does not ask before a tool runs: "
            "approval rules and permissions.unmatched do not apply to it"
        )
    elif config.permissions.unmatched == "allow":
        warnings.append(
            "permissions.unmatched is allow: the agent runs any tool no rule denies, without asking"
        )
    return warnings
