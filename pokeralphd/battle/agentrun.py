"""One agent run of a battle (an implementation iteration, or a verifier's or reviewer's
run): the request every battle run is started with, built in one place; and the scope
every process started for a battle runs under (its agents and its feedback loops)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.agents.base import AgentRequest
from pokeralphd.permissions.router import PermissionRouter
from pokeralphd.proc import AgentScope

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import AgentConfig, Config


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
        permissions=PermissionRouter(
            repo,
            orch.inbox,
            orch.host.clock,
            config.permissions,
            active.task_id,
            iteration,
            active.title,
            orch.publish,
        ),
    )
