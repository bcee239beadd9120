"""What a method handler may use: a typed services context, and the calling connection.

Handlers never see the daemon. They get :class:`Services` (the repositories, the event
bus, the daemon-wide battle engine and inbox, the method table, and the two daemon-level
actions a client may ask for: status and shutdown) through :class:`CallContext`.

A call from an agent's connection carries the agent's scope (``CallContext.scope``): the
dispatcher lets it call only the methods marked for agents, and those handlers keep it to
its own repository and task with :meth:`CallContext.own_repo` and
:meth:`CallContext.own_task`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pokeralphd.errors import OutOfScope

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    import msgspec

    from pokeralphd.battle.engine import BattleEngine
    from pokeralphd.inbox.service import InboxService
    from pokeralphd.notify.service import NotifyService
    from pokeralphd.proc import AgentScope
    from pokeralphd.protocol.results import DaemonStatus
    from pokeralphd.repositories import Repositories
    from pokeralphd.repository import Repository
    from pokeralphd.server.eventbus import Event, EventBus
    from pokeralphd.store.ledger import Ledger


class Caller(Protocol):
    """The connection a request came on (for subscriptions)."""

    subscriptions: set[int]
    scope: AgentScope | None  # set when the caller is an agent of ours

    def deliver(self, event: Event) -> bool: ...

    @property
    def replay_budget(self) -> int:
        """Bytes of events one replay may send it (what its backlog holds with room)."""
        ...


@dataclass(eq=False)
class Services:
    repos: Repositories
    bus: EventBus
    battles: BattleEngine
    inbox: InboxService
    discover: Callable[[], Awaitable[msgspec.Raw]]  # the encoded OpenRPC document
    epoch: str  # names this daemon process: sequence numbers belong to it
    status: Callable[[], DaemonStatus]
    request_shutdown: Callable[[], None]
    ledger: Ledger  # what every iteration cost, daemon-wide
    # Whose a connecting process is: None for a person, else its run's scope (or the
    # narrowest, for a process of ours with no run or one nobody can identify; blocking:
    # reads /proc), and whether any run is under way (then it walks the process's kin).
    identify: Callable[[int | None], AgentScope | None] = lambda _pid: None
    agents_running: Callable[[], bool] = lambda: False
    user_config_file: Path | None = None  # the user's layer (config.getUser/updateUser)
    notify: NotifyService | None = None  # the notifier (notify.test)


class CallContext:
    """One call: the services, the calling connection, hooks run after the reply."""

    __slots__ = ("after_reply", "conn", "scope", "services")

    def __init__(self, services: Services, conn: Caller | None) -> None:
        self.services = services
        self.conn = conn
        self.scope = conn.scope if conn is not None else None
        self.after_reply: list[Callable[[], None]] = []

    @property
    def repos(self) -> Repositories:
        return self.services.repos

    def own_repo(self, repo: str | None) -> Repository:
        """The repository ``repo`` names; for an agent, only its own (and its own when
        it names none)."""
        scope = self.scope
        if scope is None:
            return self.repos.resolve(repo)
        if scope.repo is None:
            raise OutOfScope(scope, "it works for no repository")
        own = self.repos.resolve(scope.repo)
        if repo is not None and self.repos.resolve(repo) is not own:
            raise OutOfScope(scope, f"{repo!r} is not its repository ({scope.repo})")
        return own

    def own_task(self, task_id: str | None) -> str | None:
        """``task_id`` if the caller may use it: any for a person; for an agent, only the
        task it works on (which is also what it gets when it names none)."""
        scope = self.scope
        if scope is None:
            return task_id
        if task_id is not None and task_id != scope.task_id:
            mine = f"its task is {scope.task_id}" if scope.task_id else "it works on no task"
            raise OutOfScope(scope, f"task {task_id!r} is not its own ({mine})")
        return scope.task_id
