"""A :class:`~.policy.SandboxPolicy` as a bubblewrap command line, and whether
bubblewrap can run here at all (:func:`probe`, cached).

How it composes with :mod:`pokeralphd.proc`: ``spawn`` starts ``bwrap … -- COMMAND`` in a
new session, so bwrap leads the run's process group. ``--die-with-parent`` gives bwrap
itself the kernel's death signal (it dies with the daemon, even after a ``kill -9``: the
death watch of :mod:`pokeralphd.deathwatch` is not needed) and kills what it runs when
bwrap dies, and ``--unshare-pid`` makes the run a pid namespace whose every process ends
with its first one, so a run leaves nothing behind to sweep
(:attr:`.service.SandboxRun.contains`). Not ``--new-session``: its only use is to keep a
process from pushing keystrokes into a controlling terminal (TIOCSTI), and ``spawn``'s
``setsid`` already leaves the run with none; a second ``setsid`` would take the command
out of bwrap's process group, which ``end_tree``'s ``killpg``, the run's scope by group
and the lowering of its priority while bwrap holds it rely on.

Under ``allowlist`` the command is started through :mod:`.bridge` (the daemon's own
interpreter, visible read-only), which listens on the run's loopback at
:data:`~.policy.PROXY_PORT` and carries each connection to the proxy's Unix socket,
then becomes the command (same pid, same stdio); an allowed address on the host's
loopback (a local model server) is listened on at its own address too
(:attr:`~.policy.SandboxPolicy.forwards`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pokeralphd.sandbox.policy import PROXY_PORT, PROXY_SOCKET, RUN_SOCKET

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pokeralphd.sandbox.policy import SandboxPolicy

BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge.py")
PACKAGE_HINT = (
    "install bubblewrap (Debian and Ubuntu: `sudo apt install bubblewrap`; Fedora: `sudo dnf"
    " install bubblewrap`), or set sandbox.mode to off"
)


def bwrap_argv(
    policy: SandboxPolicy,
    command: Sequence[str],
    *,
    bwrap: str = "bwrap",
    python: str = sys.executable,
    exists: Callable[[str], bool] = os.path.lexists,
    hold: tuple[int, int] | None = None,
) -> list[str]:
    """``bwrap … -- COMMAND`` confining ``command`` to ``policy`` (``exists`` tells
    whether a host path is there: a hidden file becomes /dev/null, a folder an empty
    read-only tmpfs, an absent one is skipped). ``hold``: the descriptors bwrap tells on
    once it has cloned the process that runs the command, and that process waits on before
    it starts it (``--info-fd``, ``--block-fd``: :class:`pokeralphd.runpriority.Hold`)."""
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if hold is not None:
        argv += ["--info-fd", str(hold[0]), "--block-fd", str(hold[1])]
    argv += ["--unshare-cgroup-try"]
    if policy.network != "full":
        argv.append("--unshare-net")
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    for mount in policy.mounts():
        if mount.kind == "tmpfs":
            argv += ["--tmpfs", mount.path]
        elif mount.kind == "hide":
            if not exists(mount.path):
                continue
            if os.path.isdir(mount.path):
                argv += ["--tmpfs", mount.path, "--remount-ro", mount.path]
            else:
                argv += ["--ro-bind", "/dev/null", mount.path]
        else:
            flag = "--bind" if mount.kind == "rw" else "--ro-bind"
            argv += [flag + ("-try" if mount.optional else ""), mount.path, mount.path]
    if policy.network == "full":
        argv += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
    if policy.run_socket:
        argv += ["--bind", policy.run_socket, RUN_SOCKET]
    if policy.proxy_socket:
        argv += ["--bind", policy.proxy_socket, PROXY_SOCKET]
    argv += ["--remount-ro", "/run"]
    for name, value in sorted(policy.environment().items()):
        argv += ["--unsetenv", name] if value is None else ["--setenv", name, value]
    argv += ["--chdir", policy.tree, "--"]
    if policy.proxy_socket:
        argv += [python, "-I", "-S", BRIDGE]
        argv += [str(PROXY_PORT), PROXY_SOCKET, *policy.forwards, "--"]
    return [*argv, *command]


@dataclass(frozen=True, slots=True)
class Probe:
    """Whether the sandbox can run here; ``reason`` says why not, naming the fix."""

    ok: bool
    bwrap: str | None  # the confining program (bwrap, or sandbox-exec on macOS)
    reason: str = ""
    kind: str = "bwrap"  # or "seatbelt"


def probe(bwrap: str | None = None) -> Probe:
    """Can bubblewrap confine a process here? Cached per ``bwrap`` (a machine does not
    change its mind while the daemon runs; :func:`probe.cache_clear` to ask again)."""
    return _probe(bwrap)


@functools.cache
def _probe(bwrap: str | None) -> Probe:
    if not sys.platform.startswith("linux"):
        return Probe(False, None, "bubblewrap is for Linux; macOS uses sandbox-exec")
    found = bwrap or shutil.which("bwrap")
    if not found:
        return Probe(False, None, f"bubblewrap (bwrap) is not installed: {PACKAGE_HINT}")
    trial = [found, "--die-with-parent", "--unshare-pid", "--unshare-net"]
    trial += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(False, found, f"bubblewrap could not start: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[-300:]
        hint = ""
        if "namespace" in said.lower() or "permission" in said.lower():
            hint = (
                " (unprivileged user namespaces look disabled: sysctl"
                " kernel.unprivileged_userns_clone=1, or AppArmor's"
                " kernel.apparmor_restrict_unprivileged_userns=0)"
            )
        return Probe(False, found, f"bubblewrap cannot confine a process here: {said}{hint}")
    return Probe(True, found)


probe.cache_clear = _probe.cache_clear  # type: ignore[attr-defined]
