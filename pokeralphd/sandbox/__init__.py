"""Where a run executes and what it may touch.

- :mod:`.policy`: one run's confinement as frozen data (:class:`SandboxPolicy`, built by
  :func:`build_policy`), the same for every platform;
- :mod:`.backends`: what each agent backend needs inside, and what becomes of its own
  sandbox;
- :mod:`.bwrap`: the policy as a bubblewrap command line (Linux), and the cached
  :func:`probe` of whether bubblewrap can run here;
- :mod:`.bridge`: run inside, the loopback port to the proxy's Unix socket;
- :mod:`.proxy`: the egress proxy whose refusals become permission requests;
- :mod:`.seatbelt`: the policy as a macOS Seatbelt profile.

The battle code composes them: ``build_policy`` → ``bwrap_argv(policy, command)`` →
``proc.spawn`` (which adds the process group; bwrap dies with the daemon by itself), with an
:class:`EgressProxy` serving ``policy.proxy_socket`` for the run's lifetime.
"""

from __future__ import annotations

from pokeralphd.sandbox.backends import CONFINED_ENV, BackendNeeds, needs_for
from pokeralphd.sandbox.bwrap import Probe, bwrap_argv, probe
from pokeralphd.sandbox.policy import (
    PROXY_PORT,
    PROXY_SOCKET,
    RUN_SOCKET,
    Mount,
    SandboxPolicy,
    build_policy,
)
from pokeralphd.sandbox.proxy import Decision, EgressProxy, NetworkRequest, refusal

__all__ = [
    "CONFINED_ENV",
    "PROXY_PORT",
    "PROXY_SOCKET",
    "RUN_SOCKET",
    "BackendNeeds",
    "Decision",
    "EgressProxy",
    "Mount",
    "NetworkRequest",
    "Probe",
    "SandboxPolicy",
    "build_policy",
    "bwrap_argv",
    "needs_for",
    "probe",
    "refusal",
]
