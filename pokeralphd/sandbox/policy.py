"""One run's confinement, described once: what is visible, what is writable, what is
hidden, which network, which sockets. bubblewrap (:mod:`.bwrap`) and Seatbelt
(:mod:`.seatbelt`) each translate the same :class:`SandboxPolicy`.

:func:`build_policy` makes one from the run's facts and ``sandbox.*`` (it resolves paths
on this machine, nothing more); the policy itself is frozen data, and
:meth:`SandboxPolicy.mounts` lists its mounts in the one order that makes them right:
shallower paths first, so a deeper one wins (``.git`` read-only inside a writable tree,
a backend's folder writable inside a hidden ``$HOME``), and the secrets last, so they are
hidden even inside a folder a user listed.

A user listing that names a secret itself, or a path inside one (``~/.ssh``,
``~/.ssh/id_rsa``, the daemon's runtime folder, another registered repository…), is
refused with an error naming the key and the secret: such a listing would hand every
command an agent runs, unattended, the user's keys; a repository's untrusted config
could plant it; and a key to SSH in is not what a coding agent needs (the daemon
commits and pushes). Listing a folder that contains a secret (``~``) is allowed, and the
secret is still hidden in it.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pokeralphd.errors import InvalidParams

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pokeralph_core.config.sandbox import HostPattern, NetworkMode, SandboxConfig
    from pokeralphd.sandbox.backends import BackendNeeds

# Fixed paths inside the sandbox.
RUN_SOCKET = "/run/pokeralph/run.sock"  # the run's own socket, named in POKERALPH_SOCKET
PROXY_SOCKET = "/run/pokeralph/proxy.sock"  # the egress proxy, bridged to PROXY_PORT
PROXY_PORT = 3128  # on the run's own loopback (its network namespace is its own)
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_DIRS += ("/etc", "/opt", "/nix", "/snap", "/usr/local")
# Under $HOME: never visible, even inside a folder a user listed.
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".docker/config.json",
    ".kube",
    ".password-store",
    ".pypirc",
    ".npmrc",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    "snap/firefox",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Keychains",
)

MountKind = Literal["ro", "rw", "tmpfs", "hide"]


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount: ``ro``/``rw`` the host's path at the same path, ``tmpfs`` an empty
    private folder, ``hide`` the path made empty and read-only (a folder) or /dev/null
    (a file). ``optional``: skipped when the host has no such path."""

    kind: MountKind
    path: str
    optional: bool = True


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """Everything one run's sandbox is. Paths are absolute and resolved."""

    tree: str
    tree_writable: bool
    read_only_in_tree: tuple[str, ...]  # .git (and a worktree's git folders), .pokeralph
    home: str
    system: tuple[str, ...]
    install: tuple[str, ...]  # the daemon's interpreter and package, read-only
    read_only: tuple[str, ...]  # user and backend listings
    read_write: tuple[str, ...]
    secrets: tuple[str, ...]
    network: NetworkMode
    allow: tuple[HostPattern, ...] = ()
    run_socket: str | None = None  # host path, bound at RUN_SOCKET
    proxy_socket: str | None = None  # host path, bound at PROXY_SOCKET (allowlist)

    def mounts(self) -> list[Mount]:
        """Every mount, in order (see the module doc); /proc, /dev and /tmp are the
        platform's to add before these."""
        binds: list[Mount] = [Mount("ro", p) for p in self.system]
        binds.append(Mount("tmpfs", self.home, optional=False))
        binds += [Mount("ro", p) for p in self.install]
        binds += [Mount("ro", p) for p in self.read_only]
        binds += [Mount("rw", p) for p in self.read_write]
        binds.append(Mount("rw" if self.tree_writable else "ro", self.tree, optional=False))
        binds += [Mount("ro", p) for p in self.read_only_in_tree]
        binds.sort(key=lambda m: _depth(m.path))  # stable: same depth keeps this order
        visible = [m.path for m in binds if m.kind != "tmpfs"]
        hidden: list[str] = []
        for secret in sorted(self.secrets, key=_depth):
            if _inside_any(secret, visible) and not _inside_any(secret, hidden):
                hidden.append(secret)  # one inside a hidden folder is hidden already
        return binds + [Mount("hide", s) for s in hidden]

    @property
    def forwards(self) -> tuple[str, ...]:
        """The allowed ``host:port`` targets on the host's loopback (``127.0.0.0/8``,
        ``::1``, ``localhost``, a port named, 1024 and up) that the run reaches at their own
        address, through the proxy (see :mod:`.bridge`): a local model server whose
        client ignores ``HTTP_PROXY`` (the local agent's) reaches it as outside."""
        if self.proxy_socket is None:
            return ()
        found = []
        for pattern in self.allow:
            if pattern.wildcard or pattern.port is None or pattern.port < 1024:
                continue
            if pattern.port == PROXY_PORT or not _loopback(pattern.host):
                continue
            found.append(str(pattern))
        return tuple(dict.fromkeys(found))

    @property
    def writable(self) -> tuple[str, ...]:
        """The host paths a run may write (for display and for Seatbelt)."""
        return ((self.tree,) if self.tree_writable else ()) + self.read_write

    def environment(self) -> dict[str, str | None]:
        """What to set (None: unset) in the run's environment inside."""
        env: dict[str, str | None] = {"POKERALPH_SOCKET": RUN_SOCKET if self.run_socket else None}
        if self.network == "allowlist":
            for name in PROXY_VARS:
                value = "" if name == "NO_PROXY" else PROXY_URL
                env[name] = env[name.lower()] = value
        elif self.network == "none":
            for name in PROXY_VARS:
                env[name] = env[name.lower()] = None
        return env

    def describe(self) -> dict[str, object]:
        """What ``battle show`` and the dashboard show of it."""
        return {
            "network": self.network,
            "allow": [str(a) for a in self.allow],
            "writable": list(self.writable),
            "readOnly": [self.tree] * (not self.tree_writable)
            + [*self.read_only_in_tree, *self.read_only],
            "hidden": [self.home, *self.secrets],
        }


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _depth(path: str) -> int:
    return len(Path(path).parts)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _inside_any(path: str, folders: Iterable[str]) -> bool:
    return any(_inside(path, f) for f in folders)


def _real(path: str | os.PathLike[str], home: Path) -> str:
    text = os.fspath(path)
    if text == "~" or text.startswith("~/"):
        text = str(home) + text[1:]
    return os.path.realpath(text)


def git_dirs(tree: Path) -> tuple[str, ...]:
    """``.git`` of ``tree``; for a linked worktree (``.git`` a file: ``gitdir: …``) also
    its git folder and the main repository's common folder, all read-only inside."""
    dot_git = tree / ".git"
    found = [str(dot_git)]
    if dot_git.is_file():
        try:
            line = dot_git.read_text(errors="replace").splitlines()[0]
        except (OSError, IndexError):
            return tuple(found)
        if line.startswith("gitdir:"):
            gitdir = Path(os.path.realpath(tree / line[len("gitdir:") :].strip()))
            found.append(str(gitdir))
            common = gitdir / "commondir"
            if common.is_file():
                try:
                    rel = common.read_text(errors="replace").strip()
                except OSError:
                    rel = ""
                if rel:
                    found.append(os.path.realpath(gitdir / rel))
    return tuple(dict.fromkeys(found))


def install_paths() -> tuple[str, ...]:
    """The daemon's interpreter, its environment and its package folder (an editable
    install's source tree included), so ``pokeralphctl`` works inside."""
    import pokeralphd

    package_root = Path(pokeralphd.__file__).resolve().parent.parent
    found = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found.add(os.path.realpath(os.path.dirname(sys.executable)))
    found.add(str(package_root))
    return tuple(sorted(found))


def build_policy(
    tree: Path,
    *,
    config: SandboxConfig,
    needs: BackendNeeds,
    home: Path,
    tree_writable: bool = True,
    private: Sequence[str | os.PathLike[str]] = (),
    extra_read_only: Sequence[str | os.PathLike[str]] = (),
    run_socket: str | None = None,
    proxy_socket: str | None = None,
    install: Sequence[str] | None = None,
) -> SandboxPolicy:
    """The policy of one run in ``tree``.

    ``private``: what must never be visible beyond the home secrets (the daemon's
    runtime folder, socket, web token, state and config folders, the other registered
    repositories). ``install``: the daemon's own installation (by default
    :func:`install_paths`). ``extra_read_only``: what the run needs to see beyond the system and
    the daemon (the agent CLI's installation, a toolchain). Raises InvalidParams when a
    user listing names a secret or the tree itself is private.
    """
    from pokeralph_core.config.sandbox import parse_host_pattern

    real_home = _real(home, home)
    tree_real = _real(tree, home)
    secrets = [os.path.join(real_home, s) for s in HOME_SECRETS]
    # realpath of each: a secret reached through a link is the link's target too.
    secrets += [_real(s, home) for s in secrets]
    secrets += [_real(p, home) for p in private]
    hidden = tuple(dict.fromkeys(s for s in secrets if not _inside(tree_real, s)))
    if any(_inside(tree_real, _real(p, home)) for p in private):
        raise InvalidParams(f"the working tree {tree_real} is private to the daemon", field="tree")

    def user(key: str, paths: Sequence[str]) -> tuple[str, ...]:
        out = []
        for raw in paths:
            real = _real(raw, home)
            if real == "/":
                raise InvalidParams(
                    f"sandbox.filesystem.{key} lists /: list the folders a run needs",
                    field=f"sandbox.filesystem.{key}",
                )
            for secret in hidden:
                if _inside(real, secret) or _inside(os.path.abspath(_expand(raw, home)), secret):
                    raise InvalidParams(
                        f"sandbox.filesystem.{key} lists {raw}, inside {secret}, which is never"
                        " visible in the sandbox (keys, tokens, the daemon's own files and"
                        " other repositories); remove it from the list",
                        field=f"sandbox.filesystem.{key}",
                    )
            out.append(real)
        return tuple(out)

    read_only = user("readOnly", config.filesystem.read_only)
    read_write = user("readWrite", config.filesystem.read_write)
    backend_rw = tuple(_real(p, home) for p in needs.read_write)
    backend_ro = tuple(_real(p, home) for p in (*needs.read_only, *extra_read_only))
    network = config.network.mode
    allow: tuple[HostPattern, ...] = ()
    if network == "allowlist":
        allow = tuple(parse_host_pattern(h) for h in (*needs.model_hosts, *config.network.allow))
    return SandboxPolicy(
        tree=tree_real,
        tree_writable=tree_writable,
        read_only_in_tree=(*git_dirs(Path(tree_real)), os.path.join(tree_real, ".pokeralph")),
        home=real_home,
        system=SYSTEM_DIRS,
        install=install_paths() if install is None else tuple(install),
        read_only=tuple(dict.fromkeys((*backend_ro, *read_only))),
        read_write=tuple(dict.fromkeys((*backend_rw, *read_write))),
        secrets=hidden,
        network=network,
        allow=allow,
        run_socket=run_socket,
        proxy_socket=proxy_socket if network == "allowlist" else None,
    )


def _expand(raw: str, home: Path) -> str:
    return str(home) + raw[1:] if raw == "~" or raw.startswith("~/") else raw
