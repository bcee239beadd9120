"""One agent run of a battle (an implementation iteration, or a verifier's or reviewer's
run): the request every battle run is started with, built in one place; the scope every
process started for a battle runs under (its agents and its feedback loops); and the
sandbox each of them runs in (:func:`battle_sandbox`), whose network asks go to the
same approval rules and inbox as the agent's tool calls (:func:`network_decider`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pokeralph_core.approval import NETWORK_TOOL
from pokeralphd.agents.base import AgentPermissionDecision, AgentPermissionRequest, AgentRequest
from pokeralphd.permissions.router import PermissionRouter
from pokeralphd.proc import AgentScope
from pokeralphd.sandbox.backends import url_hosts

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from pokeralph_core.config.model import AgentConfig, Config
    from pokeralphd.agents.base import AgentEvent
    from pokeralphd.battle.output import OutputStream
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.sandbox.proxy import Decision, NetworkRequest
    from pokeralphd.sandbox.service import SandboxRun


def battle_scope(orch: BattleControl, active: ActiveBattle) -> AgentScope:
    """What a process started for this battle may do on the socket: act for its
    repository and task, as its agent may, and no more."""
    return AgentScope("battle", orch.repo.name, active.task_id)


async def battle_request(
    orch: BattleControl,
    active: ActiveBattle,
    config: Config,
    agent: AgentConfig,
    prompt: str,
    *,
    workdir: Path,
    iteration: int,
    env: dict[str, str] | None = None,
) -> AgentRequest:
    """The request for one run of ``agent`` in ``workdir``: the socket and what it works
    on in its environment, the battle's timeouts and clock, the daemon's mark and the
    run's scope, and tool calls decided by the approval rules and the policy."""
    repo = orch.repo
    if agent.backend == "local" and agent.local.default_rules:
        # The daemon writes the user's config, not the agent: installed once.
        await repo.install_local_defaults()
    return AgentRequest(
        prompt=prompt,
        cwd=workdir,
        mode="execute",
        config=agent,
        env={
            "POKERALPH_SOCKET": orch.host.socket_path,
            "POKERALPH_REPO": repo.name,
            "POKERALPH_REPO_PATH": str(repo.path),
            "POKERALPH_TASK_ID": active.task_id,
            "POKERALPH_ITERATION": str(iteration),
            **(env or {}),
        },
        timeout=config.timeout_minutes * 60,
        idle_timeout=config.idle_timeout_minutes * 60,
        owner=orch.host.owner,
        scope=battle_scope(orch, active),
        clock=orch.host.clock,
        permissions=battle_router(orch, active, config, iteration),
    )


def battle_router(
    orch: BattleControl, active: ActiveBattle, config: Config, iteration: int
) -> PermissionRouter:
    """Who decides a tool call of this battle's runs: the approval rules, the policy, a
    person."""
    return PermissionRouter(
        orch.repo,
        orch.inbox,
        orch.host.clock,
        config.permissions,
        active.task_id,
        iteration,
        active.title,
        orch.publish,
    )


def network_decider(
    router: PermissionRouter, on_event: Callable[[AgentEvent], None]
) -> Callable[[NetworkRequest], Awaitable[Decision]]:
    """The egress proxy's ``decide``: a host not on the allowlist is the permission
    request ``network {host, port}``, decided as any tool call is and recorded as one
    (``on_event`` gets the ask and the decision, as the runner reports an agent's). A
    person's "allow always" (which adds a rule) or a rule's allow holds for the rest of
    the run."""

    async def decide(request: NetworkRequest) -> Decision:
        call = f"network-{uuid.uuid4().hex[:12]}"
        ask = AgentPermissionRequest(
            request_id=call,
            tool_name=NETWORK_TOOL,
            input=request.params(),
            description=f"connect to {request.target} from inside the sandbox",
            tool_use_id=call,
        )
        on_event(ask)
        answer = await router(ask)
        on_event(AgentPermissionDecision(ask, answer))
        if not answer.allow:
            return "deny"
        return "allow_always" if answer.rule_id else "allow_once"

    return decide


def battle_sandbox(
    orch: BattleControl,
    active: ActiveBattle,
    config: Config,
    *,
    workdir: Path,
    iteration: int,
    on_event: Callable[[AgentEvent], None],
    on_refused: Callable[[str], object],
    agent: AgentConfig | None = None,
) -> AbstractAsyncContextManager[SandboxRun]:
    """The sandbox of one run of this battle in ``workdir``: ``agent``'s run (its
    backend's needs) or, with none, a feedback loop. Network asks go to the battle's
    rules and inbox; each refusal is told to ``on_refused``."""
    env = {"POKERALPH_REPO_PATH": str(orch.repo.path), "POKERALPH_TASK_ID": active.task_id}
    hosts: tuple[str, ...] = ()
    if agent is not None:
        env |= agent.env
        if agent.backend == "local":
            hosts = url_hosts(agent.local.base_url)
    return orch.host.sandbox.run(
        config.sandbox,
        tree=workdir,
        scope=battle_scope(orch, active),
        backend=agent.backend if agent is not None else None,
        env=env,
        model_hosts=hosts,
        decide=network_decider(battle_router(orch, active, config, iteration), on_event),
        on_refused=lambda _request, message: on_refused(message),
    )


def refusal_note(stream: OutputStream) -> Callable[[str], None]:
    """What a run's sandbox refused, as a ``[pokeralph]`` line of its log and a notice
    (the words name what was refused and the key that allows it)."""

    def note(message: str) -> None:
        stream.raw(b"[pokeralph] " + message.encode())
        stream.chunk("notice", message)

    return note
