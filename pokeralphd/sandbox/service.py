"""The daemon's sandbox: whether runs are confined here, and one confined run's lifetime.

:class:`SandboxService` is built once by the daemon. It knows whether bubblewrap works
on this machine (the cached :func:`~.bwrap.probe`, or ``--no-sandbox``), what must
never be visible to a run (the daemon's runtime folder, socket and web token, its state
and config folders, the other registered repositories) and where runs' sockets go.

:meth:`SandboxService.run` opens one run's sandbox (an agent's run, a feedback loop, a
verification, review or planning run) and yields a :class:`SandboxRun`: the one seam
the battle code hands to ``proc.spawn`` (``wrap(argv, env, cwd) -> argv, env``), so
backends and loops never learn bubblewrap. While it is open, the run has its own socket
(bound inside at :data:`~.policy.RUN_SOCKET`, every connection in the run's scope) and,
under ``network: allowlist``, its own egress proxy whose unknown hosts go to ``decide``.
Both are closed, and their folder removed, when the run ends.

``sandbox.mode``: ``off`` never confines; ``auto`` confines where it can and says why
not where it cannot (:meth:`SandboxRun.describe`, :meth:`SandboxService.status`);
``required`` refuses (:meth:`SandboxService.check`, :class:`SandboxUnavailable`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.errors import InvalidState
from pokeralphd.protocol.results import SandboxStatus
from pokeralphd.sandbox import seatbelt
from pokeralphd.sandbox.backends import CONFINED_ENV, BackendNeeds, needs_for
from pokeralphd.sandbox.bwrap import Probe, bwrap_argv
from pokeralphd.sandbox.bwrap import probe as bwrap_probe
from pokeralphd.sandbox.policy import HOME_SECRETS, build_policy
from pokeralphd.sandbox.proxy import EgressProxy

if TYPE_CHECKING:
    from collections.abc import (
        AsyncIterator,
        Awaitable,
        Callable,
        Coroutine,
        Iterable,
        Mapping,
        Sequence,
    )

    from pokeralph_core.config.sandbox import SandboxConfig
    from pokeralphd.proc import AgentScope
    from pokeralphd.runpriority import Hold
    from pokeralphd.sandbox.policy import SandboxPolicy
    from pokeralphd.sandbox.proxy import Decision, NetworkRequest

    ServeSocket = Callable[..., Coroutine[Any, Any, None]]  # (path, scope, *, task_status)
    Decide = Callable[[NetworkRequest], Awaitable[Decision]]
    OnRefused = Callable[[NetworkRequest, str], object]

DISABLED = "the daemon was started with --no-sandbox"
PACKAGE = "bubblewrap"


class SandboxUnavailable(InvalidState):
    """Raised when ``sandbox.mode`` is ``required`` and no sandbox can run here."""


@dataclasses.dataclass(slots=True)
class SandboxRun:
    """One run's sandbox, or why there is none (``policy`` None: the run is the user's)."""

    policy: SandboxPolicy | None
    mode: str
    reason: str = ""  # why unconfined
    bwrap: str = "bwrap"
    kind: str = "bwrap"  # or "seatbelt" (macOS)
    folder: Path | None = None  # the run's private folder (Seatbelt's profile and TMPDIR)
    proxy_port: int | None = None  # Seatbelt: the egress proxy on 127.0.0.1

    @property
    def confined(self) -> bool:
        return self.policy is not None

    @property
    def contains(self) -> bool:
        """bubblewrap's run dies with the daemon and ends with all it started
        (``--die-with-parent``, its own pid namespace): see :class:`~pokeralphd.proc.Wrap`.
        Not Seatbelt's: its processes are swept by token like an unconfined run's."""
        return self.policy is not None and self.kind == "bwrap"

    @property
    def env(self) -> dict[str, str]:
        """What the run's own environment gets (a backend that sandboxes itself reads it
        to turn its own sandbox off inside ours)."""
        return {CONFINED_ENV: self.kind} if self.confined else {}

    @property
    def holds(self) -> bool:
        """bubblewrap holds the command until the daemon has lowered the run's priority
        (``--block-fd``): see :class:`~pokeralphd.runpriority.Hold`. Seatbelt cannot."""
        return self.contains

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str, hold: Hold | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` as the confined command (``bwrap … -- argv``), and its environment.
        ``proc.spawn`` puts the new session outside it (and ``nice``, unless it
        :attr:`holds` the command). The program's own installation is made visible, read-only.
        ``hold`` (bubblewrap only): the command waits on it before it starts."""
        if self.policy is None:
            return list(argv), dict(env)
        extra = program_dirs(argv[0], env.get("PATH"), cwd) if argv else ()
        policy = self.policy
        if extra:
            policy = dataclasses.replace(
                policy, read_only=tuple(dict.fromkeys((*policy.read_only, *extra)))
            )
        if self.kind == "seatbelt":
            assert self.folder is not None
            path, tmpdir = seatbelt.write_profile(policy, self.folder, proxy_port=self.proxy_port)
            full = dict(env)
            for name, value in seatbelt.environment(
                policy, tmpdir=tmpdir, proxy_port=self.proxy_port
            ).items():
                if value is None:
                    full.pop(name, None)
                else:
                    full[name] = value
            return seatbelt.sandbox_exec_argv(path, list(argv)), full
        held = hold.child_ends if hold is not None and self.holds else None
        return bwrap_argv(policy, argv, bwrap=self.bwrap, hold=held), dict(env)

    def describe(self) -> dict[str, Any]:
        """What ``battle show``, ``battle history`` and the dashboard show of it."""
        if self.policy is None:
            return {"confined": False, "mode": self.mode, "reason": self.reason}
        shown = self.policy.describe()
        # the home and its secrets by name; the daemon's own and the other repositories
        # only counted (their paths do not belong in this repository's history)
        home = self.policy.home.rstrip("/") + "/"
        hidden = [str(p) for p in shown.pop("hidden")]  # type: ignore[attr-defined]
        mine = [p for p in hidden if p == self.policy.home or p.startswith(home)]
        return {
            "confined": True,
            "mode": self.mode,
            **shown,
            "hidden": mine,
            "private": len(hidden) - len(mine),
        }


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error of ``group`` (the run's: the servers never fail on their own), or
    the group itself."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if not isinstance(inner, BaseExceptionGroup):
            return inner
        group = inner
    return group


def program_dirs(program: str, path: str | None, cwd: str) -> tuple[str, ...]:
    """The folder of ``program`` (as exec finds it, and its link's target), and for a
    Node CLI the folder holding its ``node_modules``: what running it needs to see."""
    found = (
        (program if os.path.isabs(program) else os.path.join(cwd, program))
        if os.sep in program
        else shutil.which(program, path=path)
    )
    if not found:
        return ()
    # the folder as the host resolves it: bubblewrap cannot mount at a path that goes
    # through a link (a checkout's ``.tools`` linked to another's), and the link itself
    # stays visible where its folder is
    dirs = [os.path.realpath(os.path.dirname(os.path.abspath(found)))]
    real = os.path.realpath(found)
    dirs.append(os.path.dirname(real))
    parts = Path(real).parts
    if "node_modules" in parts:
        dirs.append(str(Path(*parts[: parts.index("node_modules")])))
    return tuple(dict.fromkeys(d for d in dirs if d not in ("/", "")))


def make_folder(path: Path) -> None:
    """``mkdir -p path`` for a backend's state folder, made before the run (a bind of an
    absent folder is skipped). Under a ``.pokeralph`` component (the repository's, which
    an agent could have written) nothing is made through a link: a link there leaves the
    folder unmade, and the run without it, as before. A failure to make it likewise."""
    parts = Path(os.path.abspath(path)).parts
    guarded = parts.index(".pokeralph") if ".pokeralph" in parts else len(parts)
    here = Path(parts[0])
    for depth, part in enumerate(parts[1:], start=1):
        here = here / part
        if depth >= guarded and os.path.islink(here):
            return
        if not os.path.lexists(here):
            try:
                os.mkdir(here, 0o700)
            except OSError:
                return
        elif not os.path.isdir(here):
            return


def platform_probe() -> Probe:
    """This platform's sandbox: bubblewrap on Linux, Seatbelt on macOS."""
    return seatbelt.probe() if sys.platform == "darwin" else bwrap_probe()


class SandboxService:
    """Whether and how runs are confined on this machine; opens each run's sandbox."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        runtime_dir: Path | None = None,
        private: Callable[[], Iterable[str | os.PathLike[str]]] = tuple,
        serve_socket: ServeSocket | None = None,
        probe: Callable[[], Probe] | None = None,
    ) -> None:
        self.enabled = enabled
        self.runtime_dir = runtime_dir
        self.private = private
        self.serve_socket = serve_socket
        self._probe = probe or platform_probe

    def available(self) -> Probe:
        if not self.enabled:
            return Probe(False, None, DISABLED)
        return self._probe()

    def status(self) -> SandboxStatus:
        """For ``status``: whether runs are confined here, and if not, why."""
        found = self.available()
        if found.ok:
            return SandboxStatus(available=True, bwrap=found.bwrap)
        return SandboxStatus(
            available=False,
            bwrap=found.bwrap,
            warning=f"battles run unconfined where sandbox.mode is auto: {found.reason}",
        )

    def check(self, config: SandboxConfig) -> None:
        """Raise :class:`SandboxUnavailable` when ``config`` requires a sandbox that
        cannot run here (naming the package, or what else is missing)."""
        if config.mode != "required":
            return
        found = self.available()
        if not found.ok:
            if found.kind == "seatbelt":  # macOS: nothing to install
                raise SandboxUnavailable(
                    f"sandbox.mode is required and no sandbox can run here: {found.reason}"
                )
            raise SandboxUnavailable(
                f"sandbox.mode is required and no sandbox can run here: {found.reason}"
                f" (the Debian package is {PACKAGE}: `sudo apt install {PACKAGE}`)",
                package=PACKAGE,
            )

    @contextlib.asynccontextmanager
    async def run(
        self,
        config: SandboxConfig,
        *,
        tree: Path,
        scope: AgentScope | None,
        backend: str | None = None,
        env: Mapping[str, str] | None = None,
        model_hosts: Sequence[str] = (),
        tree_writable: bool = True,
        decide: Decide | None = None,
        on_refused: OnRefused | None = None,
    ) -> AsyncIterator[SandboxRun]:
        """One run's sandbox for its lifetime (see the module doc). Raises
        :class:`SandboxUnavailable` under ``required`` where none can run, and
        InvalidParams when ``sandbox.filesystem`` lists a secret."""
        if config.mode == "off":
            yield SandboxRun(None, "off", "sandbox.mode is off")
            return
        self.check(config)
        found = self.available()
        if not found.ok:
            yield SandboxRun(None, config.mode, found.reason)
            return
        folder, policy = await anyio.to_thread.run_sync(
            lambda: self._prepare(
                config, tree, dict(env or {}), backend, model_hosts, tree_writable, scope
            )
        )
        try:
            async with anyio.create_task_group() as tg:
                if policy.run_socket is not None and self.serve_socket is not None:
                    await tg.start(self.serve_socket, policy.run_socket, scope)
                port: int | None = None
                if policy.proxy_socket is not None:
                    proxy = EgressProxy(policy.allow, decide, on_refused=on_refused)
                    if found.kind == "seatbelt":  # no network namespace: a loopback port
                        port = await tg.start(proxy.serve_tcp)
                    else:
                        await tg.start(proxy.serve, policy.proxy_socket)
                try:
                    yield SandboxRun(
                        policy,
                        config.mode,
                        bwrap=found.bwrap or "bwrap",
                        kind=found.kind,
                        folder=folder,
                        proxy_port=port,
                    )
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the run's own error, as it was raised
            raise _sole(group) from None
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, folder, True)

    def _prepare(
        self,
        config: SandboxConfig,
        tree: Path,
        env: dict[str, str],
        backend: str | None,
        model_hosts: Sequence[str],
        tree_writable: bool,
        scope: AgentScope | None,
    ) -> tuple[Path, SandboxPolicy]:
        """The run's socket folder and policy (blocking: paths are resolved)."""
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        needs = needs_for(backend, env, home) if backend else BackendNeeds("loop")
        if model_hosts:
            needs = dataclasses.replace(needs, model_hosts=(*needs.model_hosts, *model_hosts))
        for made in needs.folders:  # the backend's state: made by its owner, as the CLI would
            make_folder(made)
        folder = self._folder()
        try:
            policy = build_policy(
                tree,
                config=config,
                needs=needs,
                home=home,
                tree_writable=tree_writable,
                private=self._private(tree, home),
                run_socket=str(folder / "run.sock") if self.serve_socket and scope else None,
                proxy_socket=str(folder / "proxy.sock"),
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return folder, policy

    def _folder(self) -> Path:
        """A private folder for one run's sockets, in the daemon's runtime folder."""
        root = (self.runtime_dir or Path(os.environ.get("TMPDIR", "/tmp"))) / "runs"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = root / uuid.uuid4().hex[:12]
        folder.mkdir(mode=0o700)
        return folder

    def _private(self, tree: Path, home: Path) -> list[str]:
        """What the run must never see: the daemon's own, other repositories (not one
        holding the tree: its own), and the daemon user's secrets when the run's HOME is
        another."""
        real_tree = os.path.realpath(tree)
        out: list[str] = []
        for path in self.private():
            real = os.path.realpath(path)
            if real_tree == real or real_tree.startswith(real.rstrip("/") + "/"):
                continue
            out.append(real)
        user_home = os.path.realpath(os.path.expanduser("~"))
        if user_home != os.path.realpath(home):
            out += [os.path.join(user_home, s) for s in HOME_SECRETS]
        return out
