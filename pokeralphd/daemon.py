"""Wiring: registry -> per-repository runtimes -> server; start-up recovery; shutdown.

``Daemon.run`` binds (or receives) the socket, loads the registry, takes each
repository's lock, serves clients until SIGTERM/SIGINT or ``daemon.shutdown``, then stops
accepting, lets running writes finish, closes clients, releases locks and returns.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd import __version__
from pokeralphd.battle.engine import BattleEngine
from pokeralphd.errors import InvalidParams, NotAGitRepo, PokeralphError, RepoNotFound
from pokeralphd.inbox.battle_hooks import InboxApprovals, offer_retry
from pokeralphd.inbox.service import InboxService
from pokeralphd.planning.service import PlanService
from pokeralphd.runtime import RepoRuntime
from pokeralphd.server.connection import ClientConnection
from pokeralphd.server.dispatch import Dispatcher
from pokeralphd.server.eventbus import EventBus
from pokeralphd.server.listener import BoundSocket, activated_socket, bind_socket, peer_credentials
from pokeralphd.server.methods import build_table
from pokeralphd.server.notify import Notifier
from pokeralphd.settings import DaemonSettings
from pokeralphd.store.registry import Registry, RegistryStore, RepoEntry

if TYPE_CHECKING:
    from anyio.abc import SocketStream

    from pokeralphd.paths import Paths

log = logging.getLogger(__name__)


class Daemon:
    def __init__(self, paths: Paths, settings: DaemonSettings | None = None) -> None:
        self.paths = paths
        self.settings = settings or DaemonSettings()
        self.bus = EventBus(self.settings.event_history)
        self.table = build_table(debug=self.settings.debug_methods)
        self.dispatcher = Dispatcher(self.table, self)
        self.registry_store = RegistryStore(paths.state_dir)
        self.registry = Registry()
        self.runtimes: dict[str, RepoRuntime] = {}
        self.connections: dict[int, ClientConnection] = {}
        self.connections_gone = anyio.Event()
        self.started = time.monotonic()
        # Sequence numbers belong to one daemon process: the epoch tells clients which one.
        self.epoch = uuid.uuid4().hex[:16]
        self.shutdown_requested = anyio.Event()
        self.registry_lock = anyio.Lock()
        self.bound: BoundSocket | None = None
        self.notifier = Notifier.from_env()
        self.battles = BattleEngine(self.settings.max_concurrent_battles)
        self.inbox = InboxService()
        self.battles.approval_hooks.append(InboxApprovals())
        self.battles.failure_hooks.append(offer_retry)
        # Extensions attach to each runtime and run beside the server (the inbox before
        # battles, which use it).
        self.planning = PlanService()
        self.extensions: list[Any] = [self.inbox, self.battles, self.planning]

    # -- repositories
    def attach(self, entry: RepoEntry) -> RepoRuntime:
        runtime = RepoRuntime(self, entry)
        try:
            if not runtime.path.is_dir():
                raise RepoNotFound(f"{runtime.path} no longer exists", path=str(runtime.path))
            runtime.lock.acquire()
            runtime.files.init()
        except PokeralphError as exc:
            runtime.failure = exc
            log.warning("repository %s unavailable: %s", entry.name, exc.message)
        for ext in self.extensions:
            ext.attach(runtime)
        self.runtimes[entry.name] = runtime
        return runtime

    def resolve(self, repo: str | None, *, usable: bool = True) -> RepoRuntime:
        """The runtime a client means: a short name, or a path inside a registered repository."""
        found = self._find(repo)
        if usable and found.error:
            raise RepoNotFound(
                f"repository {found.name} is unavailable: {found.error}", repo=found.name
            )
        return found

    def _find(self, repo: str | None) -> RepoRuntime:
        if repo is None:
            if len(self.runtimes) == 1:
                return next(iter(self.runtimes.values()))
            raise RepoNotFound(
                "name a repository (by path or name); registered: "
                + (", ".join(sorted(self.runtimes)) or "none"),
                repo=None,
                known=sorted(self.runtimes),
            )
        if repo in self.runtimes:
            return self.runtimes[repo]
        if "/" in repo or repo in (".", ".."):
            try:
                target = Path(repo).expanduser().resolve()
            except (OSError, RuntimeError) as exc:
                raise RepoNotFound(f"cannot resolve {repo!r}: {exc}", repo=repo) from exc
            best: RepoRuntime | None = None
            for runtime in self.runtimes.values():
                inside = target == runtime.path or runtime.path in target.parents
                if inside and (best is None or len(runtime.path.parts) > len(best.path.parts)):
                    best = runtime
            if best is not None:
                return best
        raise RepoNotFound(
            f"no registered repository matches {repo!r}; register it with `pokeralphctl init`",
            repo=repo,
            known=sorted(self.runtimes),
        )

    async def register(self, path: str, name: str | None, git_init: bool) -> RepoRuntime:
        root = await anyio.to_thread.run_sync(_checked_root, path)
        async with self.registry_lock:
            existing = self.registry.by_path(str(root))
            if existing is not None:
                return self.runtimes[existing.name]
            if not await anyio.Path(root / ".git").exists():
                if not git_init:
                    raise NotAGitRepo(
                        f"{root} is not a git repository; run `git init` there, "
                        "or pass gitInit (`pokeralphctl init --git-init`)",
                        path=str(root),
                    )
                await anyio.run_process(["git", "init", "-q", str(root)])
            entry = RepoEntry(name=self.registry.unique_name(name or root.name), path=str(root))
            if name is not None and entry.name != name:
                raise InvalidParams(
                    f"name {name!r} is taken or invalid; try {entry.name!r}", field="name"
                )
            runtime = self.attach(entry)
            if runtime.failure is not None:
                self.runtimes.pop(entry.name, None)
                runtime.lock.release()
                raise runtime.failure
            new = self.registry.model_copy(deep=True)
            new.repos.append(entry)
            try:
                await anyio.to_thread.run_sync(self.registry_store.save, new)
            except BaseException:
                self.runtimes.pop(entry.name, None)
                runtime.lock.release()
                raise
            self.registry = new
        self.bus.publish("repo_registered", entry.name, {"name": entry.name, "path": entry.path})
        return runtime

    async def unregister(self, runtime: RepoRuntime) -> None:
        async with self.registry_lock:
            if runtime.battles is not None:
                runtime.battles.ensure_idle()
            new = self.registry.model_copy(deep=True)
            new.repos = [r for r in new.repos if r.name != runtime.name]
            await anyio.to_thread.run_sync(self.registry_store.save, new)
            self.registry = new
            for ext in self.extensions:
                await ext.detach(runtime)
            self.runtimes.pop(runtime.name, None)
            runtime.lock.release()
        self.bus.publish(
            "repo_unregistered", runtime.name, {"name": runtime.name, "path": str(runtime.path)}
        )

    # -- status
    def status(self) -> dict[str, Any]:
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime": round(time.monotonic() - self.started, 3),
            "socket": str(self.paths.socket),
            "activated": bool(self.bound and self.bound.activated),
            "repositories": [r.describe() for r in self.runtimes.values()],
            "clients": len(self.connections),
            "seq": self.bus.seq,
            "epoch": self.epoch,
        }

    # -- serving
    async def _serve_client(self, stream: SocketStream) -> None:
        # Runs under the acceptor's guard (pokeralphd.server.accept): whatever escapes
        # ends this connection only, is logged, and the stream is closed.
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        try:
            pid, uid = peer_credentials(raw)
        except OSError:
            pid, uid = None, None
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %s (pid %s)", uid, pid)
            await stream.aclose()
            return
        await ClientConnection(self, stream, pid).serve()

    def summary_line(self) -> str:
        battles = sum(
            1 for r in self.runtimes.values() if r.battles is not None and r.battles.active
        )
        return (
            f"serving {len(self.runtimes)} repositories, {len(self.connections)} clients, "
            f"{battles} active battles"
        )

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

    async def _accept(self, listener: Any, scope: anyio.CancelScope, tg: Any) -> None:
        from pokeralphd.server.accept import Acceptor

        settings = self.settings
        # The history's byte bound is a wire limit Daemon.__init__ does not pass (yet).
        self.bus.set_limits(settings.event_history, settings.event_history_bytes)
        acceptor = Acceptor(
            self._serve_client,
            max_connections=settings.max_connections,
            fd_reserve=settings.fd_reserve,
        )
        with scope:
            await acceptor.serve(listener, tg)

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                # Keep receiving: a second signal during shutdown must not kill us half-way.
                if self.shutdown_requested.is_set():
                    log.info("received %s; already stopping", signal.Signals(signum).name)
                    continue
                log.info("received %s; shutting down", signal.Signals(signum).name)
                self.shutdown_requested.set()

    def load_registry(self) -> None:
        self.registry = self.registry_store.load()
        for entry in self.registry.repos:
            self.attach(entry)

    async def run(self) -> None:
        activated = activated_socket()
        self.bound = (
            BoundSocket(activated, self.paths.socket, activated=True)
            if activated is not None
            else bind_socket(self.paths.socket)
        )
        try:
            self.load_registry()
            listener = await anyio.abc.SocketListener.from_socket(self.bound.sock)
            log.info(
                "pokeralphd %s listening on %s (%d repositories)",
                __version__,
                self.paths.socket,
                len(self.runtimes),
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._signals)
                for ext in self.extensions:
                    await tg.start(ext.run, self)
                accepting = anyio.CancelScope()
                tg.start_soon(self._accept, listener, accepting, tg)
                self.notifier.ready(self.summary_line())
                tg.start_soon(self.notifier.watchdog_loop)
                tg.start_soon(self._status_loop)
                await self.shutdown_requested.wait()
                self.notifier.stopping()
                log.info("stopping: no new connections; finishing writes")
                accepting.cancel()
                for ext in reversed(self.extensions):
                    with anyio.CancelScope(shield=True):
                        await ext.stop(self)
                for conn in list(self.connections.values()):
                    conn.close()
                with anyio.move_on_after(3):
                    if self.connections:
                        self.connections_gone = anyio.Event()
                        await self.connections_gone.wait()
                tg.cancel_scope.cancel()
        finally:
            for runtime in self.runtimes.values():
                runtime.lock.release()
            self.bound.close()
            log.info("pokeralphd stopped")


def _checked_root(path: str) -> Path:
    """An absolute, resolved, existing directory, or :class:`RepoNotFound`."""
    root = Path(path).expanduser()
    if not root.is_absolute():
        raise RepoNotFound(f"path must be absolute, got {path!r}", path=path)
    root = root.resolve()
    if not root.is_dir():
        raise RepoNotFound(f"{root} is not a directory", path=str(root))
    return root
