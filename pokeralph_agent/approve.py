"""Approval on its own (no daemon): the same rules and the same decision as in a battle
(:func:`pokeralph_core.approval.decide` over the repository's rules, then the user's,
read with :func:`pokeralph_core.config.layers.load`, trust included), then a person at
the terminal for a call no rule decides: allow once, allow always (a user rule matching
exactly this input, as the inbox's "allow always" makes one), or deny with a note.

"Allow always" is the person's answer; the daemon writes the rule into the user's layer
(:mod:`.daemon_link`: the daemon is the one writer of that file). Without a daemon the
rule holds for this run only.

Without a terminal (a script, a pipe), an undecided call is denied, unless ``--yes``
allows every undecided call (an explicit opt-in, said at start).
"""

from __future__ import annotations

import re
import sys
from typing import IO, TYPE_CHECKING, Literal

import anyio

from pokeralph_agent.daemon_link import LinkError
from pokeralph_agent.loop import Approval
from pokeralph_core.approval import ApprovalRule, canonical, decide
from pokeralph_core.input_view import json_text, view

if TYPE_CHECKING:
    from pokeralph_agent.daemon_link import DaemonLink
    from pokeralph_agent.session import ToolCall
    from pokeralph_agent.toolspec import ToolSpec

Unmatched = Literal["ask", "allow", "deny"]
SHOWN = 1500


class TerminalApprover:
    def __init__(
        self,
        rules: list[ApprovalRule],
        unmatched: Unmatched,
        daemon: DaemonLink | None,
        tty: IO[str] | None,
    ) -> None:
        self.rules = list(rules)
        self.unmatched = unmatched
        self.daemon = daemon  # who keeps an "allow always" rule
        self.tty = tty
        self.lock = anyio.Lock()

    async def __call__(self, call: ToolCall, spec: ToolSpec) -> Approval:
        decision = decide(self.rules, spec.name, call.parameters)
        if decision.limit == "too_large":  # denied before any rule, policy or person
            return Approval(False, "policy", decision.reason)
        if decision.decision is not None and decision.rule is not None:
            rule = decision.rule
            if decision.decision == "allow":
                return Approval(True, "config_rule", rule_id=rule.id)
            return Approval(
                False, "config_rule", f"denied by rule {rule.id}: {rule.description}", rule.id
            )
        if self.unmatched == "allow":
            return Approval(True, "policy")
        if self.unmatched == "deny":
            return Approval(
                False,
                "policy",
                f"no approval rule allows this {spec.name} call and permissions.unmatched is "
                "deny (add a rule with `pokeralphctl rules add --user`)",
            )
        if self.tty is None:
            return Approval(
                False,
                "policy",
                f"no approval rule allows this {spec.name} call and no one can be asked "
                "(run it in a terminal, add a rule with `pokeralphctl rules add --user`, or "
                "pass --yes)",
            )
        async with self.lock:  # one question at a time
            return await anyio.to_thread.run_sync(self._ask, call, spec)

    def _ask(self, call: ToolCall, spec: ToolSpec) -> Approval:
        assert self.tty is not None
        shown = view(json_text(call.parameters), SHOWN)
        risk = spec.risk.replace("_", " ")
        text = shown.text.replace("\n", "\n  ")
        sys.stderr.write(
            f"\n? The agent asks to run {spec.name} ({risk}), {shown.summary}:\n  {text}\n"
        )
        while True:
            sys.stderr.write("  [y] allow once  [a] allow always  [n] deny: ")
            sys.stderr.flush()
            line = self.tty.readline()
            if not line:
                return Approval(False, "manual", "no answer (the terminal closed)")
            answer = line.strip().lower()
            if answer in ("y", "yes"):
                return Approval(True, "manual")
            if answer in ("a", "always"):
                rule_id = self._allow_always(call, spec)
                return Approval(True, "manual", rule_id=rule_id)
            if answer in ("n", "no", "d", "deny"):
                sys.stderr.write("  a note for the agent (optional): ")
                sys.stderr.flush()
                note = self.tty.readline().strip()
                return Approval(
                    False, "manual", "denied by the user" + (f": {note}" if note else "")
                )

    def _allow_always(self, call: ToolCall, spec: ToolSpec) -> str | None:
        """A user rule allowing exactly this input, kept by the daemon (for this run only
        when it cannot be asked)."""
        try:
            rule = ApprovalRule.model_validate(
                {
                    "toolName": spec.name,
                    "paramPattern": "^" + re.escape(canonical(call.parameters)) + "$",
                    "description": "allowed always at the terminal (pokeralph-agent)",
                    "decision": "allow",
                }
            )
        except ValueError as exc:
            sys.stderr.write(f"  (no rule made: {exc})\n")
            return None
        self.rules.append(rule)
        if self.daemon is not None:
            try:
                kept = self.daemon.add_user_rule(rule)
                sys.stderr.write(f"  rule {kept} added to your rules (pokeralphctl rules list)\n")
            except LinkError as exc:
                sys.stderr.write(f"  (the rule is kept for this run only: {exc.message})\n")
        return rule.id


def open_tty() -> IO[str] | None:
    """Where questions are read: stdin when it is a terminal; else none (a script or a
    pipe gets no questions: undecided calls are denied, or allowed with --yes)."""
    return sys.stdin if sys.stdin.isatty() else None
