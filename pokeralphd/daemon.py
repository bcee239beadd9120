"""The composition root and the lifecycle: build the parts, run them, recover at start,
shut down in order.

``Daemon.run`` binds (or receives) the socket, ends what a dead predecessor left
running, loads the registry (taking each repository's lock), starts the daemon-wide
services (notifications, inbox, battles, planning), serves clients until SIGTERM/SIGINT or
``daemon.shutdown``, then stops accepting, stops the services in reverse order (running
battles are left paused), closes the clients, releases the locks and returns.
Nothing here decides anything about repositories, tasks or battles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from msgspec import UNSET, UnsetType

from pokeralph_core.config import layers as config_layers
from pokeralph_core.timeutil import utcnow
from pokeralphd import __version__, heap
from pokeralphd.battle.costs import LedgerRecorder
from pokeralphd.battle.engine import BattleEngine
from pokeralphd.errors import PokeralphError
from pokeralphd.inbox.battle_hooks import InboxApprovals, InboxEscalations, offer_retry
from pokeralphd.inbox.service import InboxService
from pokeralphd.notify.service import NotifyService
from pokeralphd.planning.service import PlanService
from pokeralphd.proc import ProcessOwner
from pokeralphd.protocol.results import DaemonStatus, RunStarts
from pokeralphd.repositories import Repositories
from pokeralphd.repository import Repository
from pokeralphd.sandbox.service import SandboxService
from pokeralphd.server.context import Services
from pokeralphd.server.dispatch import Dispatcher
from pokeralphd.server.eventbus import EventBus
from pokeralphd.server.listener import BoundSocket, activated_socket, bind_socket
from pokeralphd.server.methods import build_table
from pokeralphd.server.notify import Notifier
from pokeralphd.server.runsocket import RunSockets
from pokeralphd.server.server import Server
from pokeralphd.settings import DaemonSettings
from pokeralphd.store.ledger import Ledger
from pokeralphd.store.locks import LOCK_GRACE
from pokeralphd.store.registry import RegistryStore
from pokeralphd.store.repo_store import RepoStore
from pokeralphd.web.service import WebService

if TYPE_CHECKING:
    from collections.abc import Callable

    from pokeralph_core.config.model import NotifyConfig
    from pokeralph_core.userdirs import Paths
    from pokeralphd.ports import Lifecycle
    from pokeralphd.proc import AgentScope
    from pokeralphd.store.registry import RepoEntry

log = logging.getLogger(__name__)


class Daemon:
    def __init__(
        self,
        paths: Paths,
        settings: DaemonSettings | None = None,
        notifier: Notifier | None = None,
        *,
        own_process: bool = False,
    ) -> None:
        """``own_process``: the daemon is the process (``pokeralphd``), so it sets the
        process's garbage collector for a server once ready (:mod:`.heap`)."""
        self.own_process = own_process
        self.paths = paths
        self.settings = settings = settings or DaemonSettings()
        self.notifier = notifier or Notifier(None, None)
        self.started = time.monotonic()
        # Sequence numbers belong to one daemon process: the epoch tells clients which one.
        self.epoch = uuid.uuid4().hex[:16]
        self.owner = ProcessOwner.for_state_dir(
            paths.state_dir, settings.run_nice, settings.starting_runs
        )
        self.shutdown_requested = anyio.Event()
        self.ready = anyio.Event()  # set once clients are being served
        self.bound: BoundSocket | None = None

        self.bus = EventBus(settings.event_history, settings.event_history_bytes)
        self.inbox = InboxService()
        # Where battles' runs execute; their sockets are served once the dispatcher is.
        self.run_sockets: RunSockets | None = None
        self.sandbox = SandboxService(
            enabled=settings.sandbox,
            runtime_dir=paths.socket.parent,
            private=self._private_paths,
            serve_socket=self._serve_run_socket,
        )
        self.battles = BattleEngine(
            settings.max_concurrent_battles,
            owner=self.owner,
            socket_path=str(paths.socket),
            worktree_root=paths.state_dir / "worktrees",
            sandbox=self.sandbox,
        )
        self.battles.approval_hooks.append(InboxApprovals())
        self.battles.failure_hooks.append(offer_retry)
        self.battles.escalation_hooks.append(InboxEscalations())
        self.ledger = Ledger(paths.state_dir / "ledger")
        self.battles.cost_hooks.append(LedgerRecorder(self.ledger))
        self.battles.spend = self._spent_today
        self.planning = PlanService(owner=self.owner, sandbox=self.sandbox)
        # Notifications: the bus's events, to the channels of the user's config.
        self.notify = NotifyService(self.bus, self._notify_config, self._dashboard_url)
        # Started in this order, stopped in the reverse one.
        self.services: list[Lifecycle] = [self.notify, self.inbox, self.battles, self.planning]
        self.repos = Repositories(
            RegistryStore(paths.state_dir), self.bus, self._build_repo, self._release_repo
        )
        self.table = build_table(debug=settings.debug_methods)
        dispatcher = Dispatcher(self.table)
        services = Services(
            repos=self.repos,
            bus=self.bus,
            battles=self.battles,
            inbox=self.inbox,
            discover=self.table.discover_encoded,
            epoch=self.epoch,
            status=self.status,
            request_shutdown=self.shutdown_requested.set,
            ledger=self.ledger,
            identify=self.owner.identify,
            agents_running=lambda: self.owner.runs > 0,
            user_config_file=paths.user_config_file,
            notify=self.notify,
        )
        self.server = Server(dispatcher, services, settings)
        self.run_sockets = RunSockets(dispatcher, services, settings)
        # The dashboard: a third transport to the same dispatcher and event bus.
        self.web = (
            WebService(dispatcher, services, settings, paths.socket) if settings.web else None
        )

    # -- repositories
    def _build_repo(self, entry: RepoEntry) -> Repository:
        store = RepoStore(entry, self.bus, self.paths.user_config_file, self.paths.state_dir)
        # At start nothing is served yet: a dead predecessor's lock, still held by a child
        # of it on its way to exec, is waited for. Once serving, a repository registered
        # is not: the wait would block the event loop.
        store.open(lock_grace=0 if self.ready.is_set() else LOCK_GRACE)
        if store.failure is not None:
            log.warning("repository %s unavailable: %s", entry.name, store.failure.message)
        inbox = self.inbox.attach(store)
        return Repository(
            store=store,
            inbox=inbox,
            battles=self.battles.attach(store, inbox),
            planner=self.planning.attach(store, inbox),
        )

    async def _release_repo(self, repo: Repository) -> None:
        self.battles.detach(repo.battles)
        await self.planning.detach(repo.planner)
        repo.store.close()

    async def _notify_config(self, repo: str | None) -> NotifyConfig:
        """The notifications of ``repo``'s events: its effective config (the user's,
        made no louder by the repository's), else the user's."""
        if repo is not None:
            with contextlib.suppress(PokeralphError):
                return (await self.repos.resolve(repo).store.config()).notify
        user = self.paths.user_config_file
        loaded = await anyio.to_thread.run_sync(config_layers.load, user, None)
        return loaded.config.notify

    def _dashboard_url(self) -> str | None:
        return self.web.url if self.web is not None else None

    # -- the sandbox
    def _private_paths(self) -> list[str]:
        """What no run may see: the daemon's runtime folder (its socket, web token, runs'
        sockets), state and config folders, and every registered repository (a run's
        own is left out by the sandbox)."""
        paths = self.paths
        private = [str(paths.socket.parent), str(paths.socket), str(paths.config_dir)]
        private.append(str(paths.state_dir))
        private += [str(repo.store.path) for repo in self.repos]
        return private

    async def _serve_run_socket(
        self,
        path: str,
        scope: AgentScope,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        assert self.run_sockets is not None
        await self.run_sockets.serve(path, scope, task_status=task_status)

    def _load_ledger(self) -> None:
        try:
            self.ledger.load()
        except PokeralphError as exc:  # a hand-broken month: the daemon still starts
            log.error("the cost ledger could not be read: %s", exc.message)

    def _spent_today(self, repo: str | None) -> float:
        return self.ledger.day_total(utcnow().date().isoformat(), repo).cost_usd

    # -- status
    def status(self) -> DaemonStatus:
        return DaemonStatus(
            version=__version__,
            pid=os.getpid(),
            uptime=round(time.monotonic() - self.started, 3),
            socket=str(self.paths.socket),
            activated=bool(self.bound and self.bound.activated),
            repositories=[r.describe() for r in self.repos],
            clients=self._clients(),
            seq=self.bus.seq,
            epoch=self.epoch,
            spend_today=self.ledger.day_total(utcnow().date().isoformat()).spend(),
            sandbox=self.sandbox.status(),
            starts=self._starts(),
        )

    def _starts(self) -> RunStarts | UnsetType:
        gate = self.owner.start_gate
        if gate is None:
            return UNSET
        return RunStarts(slots=gate.slots, starting=gate.starting, waiting=gate.waiting)

    def _clients(self) -> int:
        return len(self.server.connections) + (len(self.web.connections) if self.web else 0)

    def summary_line(self) -> str:
        battles = sum(len(r.battles.actives()) for r in self.repos)
        return (
            f"serving {len(self.repos)} repositories, {self._clients()} clients, "
            f"{battles} active battles"
        )

    # -- lifecycle
    async def _status_loop(self) -> None:
        """Keep systemd's STATUS= line current (only when a notify socket was given)."""
        if not self.notifier.enabled:
            return
        last = ""
        while True:
            line = self.summary_line()
            if line != last:
                self.notifier.status(line)
                last = line
            await anyio.sleep(5)

    def _handle_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT ask for shutdown; once stopping, further ones are ignored.

        Plain handlers rather than the event loop's: removing a loop's handler puts the
        default action back, and a signal in that instant would kill the last steps of a
        shutdown (seen under load). These handlers are replaced by SIG_IGN directly, so
        there is no such instant. Returns what to call when the daemon is done."""
        loop = asyncio.get_running_loop()

        def received(signum: int) -> None:
            name = signal.Signals(signum).name
            if self.shutdown_requested.is_set():
                log.info("received %s; already stopping", name)
                return
            log.info("received %s; shutting down", name)
            self.shutdown_requested.set()

        def handler(signum: int, _frame: object) -> None:
            loop.call_soon_threadsafe(received, signum)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

        def done() -> None:
            for sig, old in previous.items():
                # Stopping: a late signal must not kill the last steps (locks, socket).
                signal.signal(sig, signal.SIG_IGN if self.shutdown_requested.is_set() else old)

        return done

    async def run(self, *, handle_signals: bool = True) -> None:
        restore_signals: Callable[[], None] | None = None
        activated = activated_socket()
        self.bound = (
            BoundSocket(activated, self.paths.socket, activated=True)
            if activated is not None
            else await anyio.to_thread.run_sync(bind_socket, self.paths.socket)
        )
        try:
            # Whatever a dead predecessor left running (agents, feedback loops) goes first.
            await anyio.to_thread.run_sync(self.owner.sweep_orphans)
            await anyio.to_thread.run_sync(self._load_ledger)
            self.repos.load()
            listener = await anyio.abc.SocketListener.from_socket(self.bound.sock)
            log.info(
                "pokeralphd %s listening on %s (%d repositories)",
                __version__,
                self.paths.socket,
                len(self.repos),
            )
            if handle_signals:
                restore_signals = self._handle_signals()
            # The platform's sandbox probe (a trial run of bubblewrap; cached) off the loop
            # now, not inside the first status or battle start that asks: ~5 ms here.
            await anyio.to_thread.run_sync(self.sandbox.available)
            async with anyio.create_task_group() as tg:
                for service in self.services:
                    await tg.start(_run_service, service)
                await tg.start(self.server.serve, listener)
                if self.web is not None:
                    await tg.start(self.web.run)
                if self.own_process:
                    heap.settle()  # what starting made, out of the collector's way
                self.notifier.ready(self.summary_line())
                self.ready.set()
                tg.start_soon(self.notifier.watchdog_loop)
                tg.start_soon(self._status_loop)
                await self.shutdown_requested.wait()
                self.notifier.stopping()
                log.info("stopping: no new connections; finishing writes")
                self.server.stop_accepting()
                if self.web is not None:
                    self.web.stop_accepting()
                for service in reversed(self.services):
                    with anyio.CancelScope(shield=True):
                        await service.stop()
                async with anyio.create_task_group() as closing:
                    closing.start_soon(self.server.close_all, 3)
                    if self.web is not None:
                        closing.start_soon(self.web.close_all, 3)
                tg.cancel_scope.cancel()
        finally:
            if restore_signals is not None:
                restore_signals()
            self.repos.close_all()
            self.bound.close()
            log.info("pokeralphd stopped")


async def _run_service(
    service: Lifecycle, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    await service.run(task_status=task_status)
