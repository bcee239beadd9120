"""Repositories: the registered repositories, by name or by a path inside one.

It owns the user registry file (``registry.json``): loading it at start, registering and
unregistering (serialised, written atomically before anything is announced), and name
resolution for every method that takes a ``repo`` param. How a :class:`Repository` is
built and released is the composition root's business: it passes ``build`` and
``release`` in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pokeralphd import gitcmd
from pokeralphd.errors import InvalidParams, NotAGitRepo, RepoNotFound
from pokeralphd.protocol import events as ev
from pokeralphd.store.registry import Registry, RegistryStore, RepoEntry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from pokeralphd.ports import EventSink
    from pokeralphd.repository import Repository


class Repositories:
    def __init__(
        self,
        store: RegistryStore,
        events: EventSink,
        build: Callable[[RepoEntry], Repository],
        release: Callable[[Repository], Awaitable[None]],
    ) -> None:
        self._store = store
        self._events = events
        self._build = build
        self._release = release
        self._registry = Registry()
        self._by_name: dict[str, Repository] = {}
        self._lock = anyio.Lock()

    # -- reading
    def __iter__(self) -> Iterator[Repository]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def get(self, name: str) -> Repository | None:
        return self._by_name.get(name)

    def resolve(self, repo: str | None, *, usable: bool = True) -> Repository:
        """The repository a client means: a short name, or a path inside one.

        Raises :class:`RepoNotFound` when none matches or, with ``usable``, when the one
        that matches cannot be used (missing folder, held by another daemon).
        """
        found = self._find(repo)
        if usable and found.error:
            raise RepoNotFound(
                f"repository {found.name} is unavailable: {found.error}", repo=found.name
            )
        return found

    def scope(self, repo: str | None) -> list[Repository]:
        """One repository when named, else every usable one."""
        if repo:
            return [self.resolve(repo)]
        return [r for r in self if r.failure is None]

    def _find(self, repo: str | None) -> Repository:
        if repo is None:
            if len(self._by_name) == 1:
                return next(iter(self._by_name.values()))
            raise RepoNotFound(
                "name a repository (by path or name); registered: "
                + (", ".join(self.names()) or "none"),
                repo=None,
                known=self.names(),
            )
        if repo in self._by_name:
            return self._by_name[repo]
        if "/" in repo or repo in (".", ".."):
            try:
                target = Path(repo).expanduser().resolve()
            except (OSError, RuntimeError, ValueError) as exc:
                raise RepoNotFound(f"cannot resolve {repo!r}: {exc}", repo=repo) from exc
            best: Repository | None = None
            for candidate in self._by_name.values():
                inside = target == candidate.path or candidate.path in target.parents
                if inside and (best is None or len(candidate.path.parts) > len(best.path.parts)):
                    best = candidate
            if best is not None:
                return best
        raise RepoNotFound(
            f"no registered repository matches {repo!r}; register it with `pokeralphctl init`",
            repo=repo,
            known=self.names(),
        )

    # -- changing
    def load(self) -> None:
        """Read the registry and build every repository in it (at start)."""
        self._registry = self._store.load()
        for entry in self._registry.repos:
            self._by_name[entry.name] = self._build(entry)

    async def register(self, path: str, name: str | None, git_init: bool) -> Repository:
        root = await anyio.to_thread.run_sync(checked_root, path)
        async with self._lock:
            existing = self._registry.by_path(str(root))
            if existing is not None:
                return self._by_name[existing.name]
            entry = RepoEntry(name=self._registry.unique_name(name or root.name), path=str(root))
            if name is not None and entry.name != name:  # before anything is written
                raise InvalidParams(
                    f"name {name!r} is taken or invalid; try {entry.name!r}", field="name"
                )
            if not await anyio.Path(root / ".git").exists():
                if not git_init:
                    raise NotAGitRepo(
                        f"{root} is not a git repository; run `git init` there, "
                        "or pass gitInit (`pokeralphctl init --git-init`)",
                        path=str(root),
                    )
                await gitcmd.run_async(root, "init", "-q", str(root), repository=False)
            repo = self._build(entry)
            if repo.failure is not None:
                await self._release(repo)
                raise repo.failure
            new = self._registry.model_copy(deep=True)
            new.repos.append(entry)
            try:
                await anyio.to_thread.run_sync(self._store.save, new)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._release(repo)
                raise
            self._registry = new
            self._by_name[entry.name] = repo
        self._events.publish(ev.RepoRegistered(name=entry.name, path=entry.path), entry.name)
        return repo

    async def unregister(self, repo: Repository) -> None:
        async with self._lock:
            repo.battles.ensure_idle()
            new = self._registry.model_copy(deep=True)
            new.repos = [r for r in new.repos if r.name != repo.name]
            await anyio.to_thread.run_sync(self._store.save, new)
            self._registry = new
            self._by_name.pop(repo.name, None)
            await self._release(repo)
        self._events.publish(ev.RepoUnregistered(name=repo.name, path=str(repo.path)), repo.name)

    def close_all(self) -> None:
        """Release every repository's lock (at shutdown)."""
        for repo in self._by_name.values():
            repo.store.close()


def checked_root(path: str) -> Path:
    """An absolute, resolved, existing directory, or :class:`RepoNotFound`."""
    if "\0" in path:
        raise InvalidParams("path must not contain a NUL byte", field="path")
    try:  # ~nosuchuser, a name or path too long for the filesystem
        root = Path(path).expanduser()
        if not root.is_absolute():
            raise RepoNotFound(f"path must be absolute, got {path!r}", path=path)
        root = root.resolve()
        is_dir = root.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:
        raise RepoNotFound(f"cannot use {path!r}: {exc}", path=path) from exc
    if not is_dir:
        raise RepoNotFound(f"{root} is not a directory", path=str(root))
    return root
