"""One rate-limit governor for every battle of the daemon.

A rate limit or an overload seen by any battle on a backend pauses every battle on that
backend until the reset (an overload, which names no reset, for its backoff). Battles
are told apart by *endpoint*: the backend and where it sends requests (its base URL,
when the agent's environment or config names one), since each endpoint and account has
its own limits.

Before each agent run a battle takes its turn (:meth:`RateGovernor.turn`): nothing to
wait for costs nothing; otherwise the battle shows as ``blocked`` until the reset, and
then the waiting battles go one at a time in task priority order, :data:`SPACING`
seconds apart, so they do not hit the limit again together. A person's ``battle
resume`` ends one battle's wait at once.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from pokeralph_core.config.model import AgentConfig
    from pokeralphd.ports import Clock

SPACING = 2.0  # seconds between battles let go after a reset
DAY = 86_400.0  # a wait with no time of its own (until something changes)
URL_VARS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE")
KEY_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY")


def endpoint_of(agent: AgentConfig) -> str:
    """Which limits a run counts against: the backend, and its endpoint and key when the
    config names them (a key only as a short hash)."""
    parts: list[str] = [agent.backend]
    env = agent.env
    url = next((env[v] for v in URL_VARS if env.get(v)), None)
    if agent.backend == "local":
        url = agent.local.base_url
    if url:
        parts.append(url)
    key = next((env[v] for v in KEY_VARS if env.get(v)), None)
    if key:
        parts.append("key:" + hashlib.sha256(key.encode()).hexdigest()[:8])
    return " ".join(parts)


@dataclass
class _Endpoint:
    until: float = 0.0  # limited until (epoch seconds on the clock)
    next_free: float = 0.0  # the next battle may go at this time (spacing)
    seen_by: str = ""  # the task that saw the limit
    waiting: set[tuple[int, int, str]] = field(default_factory=set)  # (priority, seq, task)
    changed: anyio.Event = field(default_factory=anyio.Event)


@dataclass(frozen=True, slots=True)
class Wait:
    """What a waiting battle is told: until when (about), and why."""

    until: float
    seen_by: str


class RateGovernor:
    def __init__(self, clock: Clock, spacing: float = SPACING) -> None:
        self.clock = clock
        self.spacing = spacing
        self._endpoints: dict[str, _Endpoint] = {}
        self._seq = itertools.count()

    def limited(self, endpoint: str, until: float, seen_by: str) -> None:
        """A battle (task ``seen_by``) hit a limit on ``endpoint`` lasting until ``until``."""
        state = self._endpoints.setdefault(endpoint, _Endpoint())
        if until > state.until:
            state.until, state.seen_by = until, seen_by
            self._wake(state)

    def waits(self, endpoint: str) -> Wait | None:
        """Whether a run on ``endpoint`` would wait now (and for what)."""
        state = self._endpoints.get(endpoint)
        if state is None:
            return None
        now = self.clock.time()
        start = max(state.until, state.next_free)
        if now >= start and not state.waiting:
            return None
        return Wait(start, state.seen_by)

    async def turn(
        self, endpoint: str, priority: int, task_id: str, interrupt: anyio.Event | None = None
    ) -> None:
        """Wait until this battle may run on ``endpoint``: past the reset, first in
        priority order, and spaced from the one before. ``interrupt`` (a person's
        resume) ends the wait at once."""
        state = self._endpoints.get(endpoint)
        if state is None:
            return
        me = (priority, next(self._seq), task_id)
        state.waiting.add(me)
        try:
            while True:
                now = self.clock.time()
                start = max(state.until, state.next_free)
                ranked = sorted(state.waiting)
                rank = ranked.index(me)
                if rank == 0 and now >= start:
                    break
                if interrupt is not None and interrupt.is_set():
                    break
                slot = start + self.spacing * rank
                await self._wait(state.changed, interrupt, slot - now if slot > now else DAY)
        finally:
            state.waiting.discard(me)
            state.next_free = max(state.next_free, self.clock.time() + self.spacing)
            self._wake(state)

    async def _wait(
        self, changed: anyio.Event, interrupt: anyio.Event | None, seconds: float
    ) -> None:
        """Until ``changed`` or ``interrupt`` is set, or ``seconds`` passed on the clock."""
        async with anyio.create_task_group() as tg:

            async def watch(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch, changed)
            if interrupt is not None:
                tg.start_soon(watch, interrupt)
            await self.clock.sleep(seconds)
            tg.cancel_scope.cancel()

    @staticmethod
    def _wake(state: _Endpoint) -> None:
        state.changed.set()
        state.changed = anyio.Event()
