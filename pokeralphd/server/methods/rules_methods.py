"""``rules.*``: the approval rules that decide an agent's tool calls without asking.

Rules live in the config layers (``approvalRules``: the repository's, then the user's);
a repository's rules apply only once its layer is trusted. ``rules.add`` writes through
the config layer (a trusted layer stays trusted, as with ``config.update``); usage is kept
by the daemon in state files, not in the config.

The user's layer is one file for every repository, written by the daemon alone: the
local agent's terminal ("allow always", its read-only defaults) asks for it here
(``rules.add`` with scope user, ``rules.installDefaults``), without naming a repository
when it runs in a folder the daemon does not know. None of these is for agents: a rule
is made by a person's answer (here, the inbox's "allow always", or the terminal's),
never on an agent's own authority.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from pydantic import ValidationError

from pokeralph_core import input_view
from pokeralph_core.approval import ApprovalRule
from pokeralph_core.documents import first_error
from pokeralph_core.timeutil import utcnow
from pokeralphd.errors import InvalidParams, RepoNotFound
from pokeralphd.protocol.params import (
    RepoParams,
    RulesAddParams,
    RulesRemoveParams,
    RulesTestParams,
)
from pokeralphd.protocol.results import (
    RuleAddResult,
    RulesInstallDefaultsResult,
    RulesListResult,
    RulesRemoveResult,
    RulesTestResult,
)

if TYPE_CHECKING:
    from pokeralphd.repository import Repository
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def user_layer_repo(ctx: CallContext, repo: str | None) -> Repository:
    """The repository through which the user's layer is written: the one named, else the
    one registered, else the first usable one (the user's layer is the same file from
    every repository; its ``config_updated`` event goes out on that one)."""
    if repo is not None or len(ctx.repos) == 1:
        return ctx.repos.resolve(repo)
    for found in sorted(ctx.repos, key=lambda r: r.name):
        if found.error is None:
            return found
    raise RepoNotFound(
        "no usable repository is registered, and the user's rules are written through one: "
        "register one first (`pokeralphctl register`)",
        repo=None,
    )


def register(table: MethodTable) -> None:
    @table.add(
        "rules.list",
        RepoParams,
        "The approval rules in effect, in order (the repository's, then the user's), with "
        "the layer each comes from and its usage; says how many rules of an untrusted "
        "repository layer are ignored.",
        result=RulesListResult,
    )
    async def list_(ctx: CallContext, params: RepoParams) -> RulesListResult:
        current = await ctx.repos.resolve(params.repo).store.rules()
        return RulesListResult(
            rules=[r.view() for r in current.rules],
            ignored_repo_rules=current.ignored_repo_rules,
            trust_message=current.trust_message,
        )

    @table.add(
        "rules.add",
        RulesAddParams,
        "Add an approval rule to the repository's config layer (scope repo; it must be "
        "trusted) or the user's (scope user; no repository need be named). Refused: a "
        "pattern that does not compile, an unknown tool, an allow rule that matches every "
        "input (a blanket), a duplicate.",
        result=RuleAddResult,
    )
    async def add(ctx: CallContext, params: RulesAddParams) -> RuleAddResult:
        if params.scope == "user":
            store = user_layer_repo(ctx, params.repo).store
        else:
            store = ctx.repos.resolve(params.repo).store
        try:
            rule = ApprovalRule.model_validate(  # by alias: errors name the wire's fields
                {
                    "toolName": params.tool_name,
                    "decision": params.decision,
                    "paramPattern": params.param_pattern,
                    "description": params.description,
                    "createdAt": utcnow(),
                }
            )
        except ValidationError as exc:
            field, message = first_error(exc)
            raise InvalidParams(f"{field}: {message}", field=field) from exc
        return RuleAddResult(rule=(await store.add_rule(rule, params.scope)).view())

    @table.add(
        "rules.installDefaults",
        RepoParams,
        "Add the local agent's read-only default rules to the user's layer, once (a rule "
        "the user removed is not brought back); no repository need be named.",
        result=RulesInstallDefaultsResult,
    )
    async def install_defaults(ctx: CallContext, params: RepoParams) -> RulesInstallDefaultsResult:
        repo = user_layer_repo(ctx, params.repo)
        return RulesInstallDefaultsResult(added=await repo.store.install_local_defaults())

    @table.add(
        "rules.remove",
        RulesRemoveParams,
        "Remove the approval rule with this id from every layer that has it (and its usage).",
        result=RulesRemoveResult,
    )
    async def remove(ctx: CallContext, params: RulesRemoveParams) -> RulesRemoveResult:
        removed = await ctx.repos.resolve(params.repo).store.remove_rule(params.id)
        return RulesRemoveResult(removed=[r.view() for r in removed])

    @table.add(
        "rules.test",
        RulesTestParams,
        "Which rule would decide a call of this tool with this input, and why (a deny rule "
        "wins over allow rules; an input too large, or one the rules take too long over, is "
        "denied); decision null: no rule, the policy decides. Counts nothing. inputView: the "
        "input as a person is shown it (its length, its head and tail with where it was cut, "
        "nothing invisible).",
        result=RulesTestResult,
    )
    async def test(ctx: CallContext, params: RulesTestParams) -> RulesTestResult:
        current = await ctx.repos.resolve(params.repo).store.rules()
        decision, rule = await anyio.to_thread.run_sync(current.decide, params.tool, params.input)
        shown = input_view.view(input_view.json_text(params.input))
        return RulesTestResult(
            decision=decision.decision,
            rule=rule.view() if rule is not None else None,
            reason=decision.reason,
            canonical_input=decision.canonical_input,
            input_length=shown.length,
            input_view=shown.text,
        )
