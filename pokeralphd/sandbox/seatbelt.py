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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralphd.sandbox.policy import SandboxPolicy

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
    if run_socket:
        lines.append(
            f"(allow network-outbound (remote unix-socket (path-literal {quote(run_socket)})))"
        )
    return "\n".join(line for line in lines if line) + "\n"


def sandbox_exec_argv(profile_path: str, command: list[str]) -> list[str]:
    """``sandbox-exec -f PROFILE COMMAND…``."""
    return ["/usr/bin/sandbox-exec", "-f", profile_path, *command]
