"""A :class:`~.policy.SandboxPolicy` as a macOS Seatbelt profile (SBPL) for
``sandbox-exec -f PROFILE COMMAND``.

Generated and unit-tested on Linux; never run here (docs/sandbox.md says what was run on a
Mac). Seatbelt has no mount namespace, so the same policy becomes rules, the later of
two matching rules winning:

- reads: everything, then ``$HOME`` denied, then the listed and the backend's paths (and
  the tree) allowed again, then every secret denied last;
- writes: denied by default; the tree (unless a planning run), the read-write listings,
  the run's own temporary folder (``TMPDIR``: macOS has no private /tmp) and the devices
  a shell needs allowed; the tree's ``.git`` and ``.pokeralph`` denied again;
- network: nothing out but the proxy on ``localhost:PORT`` (``allowlist``), nothing at all
  (``none``), anything (``full``); the run's own socket by path.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from pokeralphd.sandbox.bwrap import Probe
from pokeralphd.sandbox.policy import PROXY_VARS

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.sandbox.policy import SandboxPolicy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"


def probe(platform: str = sys.platform, program: str = SANDBOX_EXEC) -> Probe:
    """Can Seatbelt confine a process here (macOS, ``sandbox-exec`` present)?"""
    if platform != "darwin":
        return Probe(False, None, "Seatbelt is macOS's", kind="seatbelt")
    if not os.access(program, os.X_OK):
        return Probe(False, None, f"{program} is missing", kind="seatbelt")
    return Probe(True, program, kind="seatbelt")


def environment(
    policy: SandboxPolicy, *, tmpdir: str, proxy_port: int | None
) -> dict[str, str | None]:
    """What the run's environment gets under Seatbelt (None: unset): no mounts move
    anything, so the run's socket is named by its host path, the proxy by its loopback
    port, and the temporary folder is the run's own."""
    env: dict[str, str | None] = {"POKERALPH_SOCKET": policy.run_socket, "TMPDIR": tmpdir}
    for name in PROXY_VARS:
        if policy.network == "allowlist" and proxy_port is not None:
            value: str | None = "" if name == "NO_PROXY" else f"http://127.0.0.1:{proxy_port}"
        elif policy.network == "full":
            continue
        else:
            value = None
        env[name] = env[name.lower()] = value
    return env


def write_profile(
    policy: SandboxPolicy, folder: Path, *, proxy_port: int | None
) -> tuple[str, str]:
    """The run's profile written in its private ``folder`` (0600), and the run's own
    temporary folder: both paths."""
    tmpdir = folder / "tmp"
    tmpdir.mkdir(mode=0o700, exist_ok=True)
    text = profile(
        policy, tmpdir=str(tmpdir), proxy_port=proxy_port, run_socket=policy.run_socket or ""
    )
    path = folder / f"profile-{os.urandom(4).hex()}.sb"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return str(path), str(tmpdir)


DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/urandom")


def quote(path: str) -> str:
    """An SBPL string literal."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _subpaths(paths: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"(subpath {quote(p)})" for p in paths)


def profile(
    policy: SandboxPolicy, *, tmpdir: str, proxy_port: int | None = None, run_socket: str = ""
) -> str:
    """The SBPL profile of ``policy``; ``tmpdir`` is the run's own temporary folder,
    ``proxy_port`` where the proxy listens on the loopback (allowlist), ``run_socket``
    the run's socket path."""
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec process-fork signal (target same-sandbox))",
        "(allow sysctl-read mach-lookup ipc-posix-shm iokit-open file-ioctl)",
        "(allow file-read-metadata)",
        "(allow file-read*)",
        f"(deny file-read* (subpath {quote(policy.home)}))",
    ]
    visible = [
        *policy.install,
        *policy.read_only,
        *policy.read_write,
        policy.tree,
    ]
    lines.append(f"(allow file-read* {_subpaths(visible)})")
    writable = [*policy.writable, tmpdir]
    lines.append(f"(allow file-write* {_subpaths(writable)})")
    lines.append("(allow file-write* " + " ".join(f"(literal {quote(d)})" for d in DEVICES) + ")")
    lines.append(f"(deny file-write* {_subpaths(policy.read_only_in_tree)})")
    if policy.secrets:
        lines.append(f"(deny file-read* file-write* {_subpaths(policy.secrets)})")
    if policy.network == "full":
        lines.append("(allow network*)")
    elif policy.network == "allowlist" and proxy_port is not None:
        lines.append(f'(allow network-outbound (remote ip "localhost:{proxy_port}"))')
    if policy.network == "allowlist":
        # an allowed model server on this machine's loopback, reached at its own address
        # (no network namespace to bridge into on macOS)
        for target in policy.forwards:
            port = target.rsplit(":", 1)[1]
            lines.append(f'(allow network-outbound (remote ip "localhost:{port}"))')
    if run_socket:
        lines.append(
            f"(allow network-outbound (remote unix-socket (path-literal {quote(run_socket)})))"
        )
    return "\n".join(line for line in lines if line) + "\n"


def sandbox_exec_argv(profile_path: str, command: list[str]) -> list[str]:
    """``sandbox-exec -f PROFILE COMMAND…``."""
    return ["/usr/bin/sandbox-exec", "-f", profile_path, *command]
