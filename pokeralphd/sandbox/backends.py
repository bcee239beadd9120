"""What each agent backend needs inside the sandbox, and what becomes of its own sandbox.

A backend's CLI keeps state under ``$HOME`` (hidden inside), reads settings from the
environment and talks to its model endpoint. :func:`needs_for` resolves, for one run's
environment, the paths it must see (read-write: a CLI writes its sessions and logs),
the model hosts the proxy lets through, and whether the CLI's own sandbox runs nested
or is turned off because ours confines it (the evidence is in docs/sandbox.md). The
folders among them are made before the run when absent (``folders``): a bind of an
absent path is skipped, and what the CLI wrote there would vanish with the run (a local
agent's session store, under the read-only ``.pokeralph/``, could not be made at all).

- ``claude``: ``~/.claude`` and ``~/.claude.json`` (or ``$CLAUDE_CONFIG_DIR``); the model
  host from ``ANTHROPIC_BASE_URL`` (else api.anthropic.com). Its bash sandbox is off unless
  a user's settings turn it on; we leave it as configured (``keep``): nested bubblewrap
  runs here, and it can only narrow what ours allows.
- ``codex``: ``$CODEX_HOME`` (else ``~/.codex``); the hosts of ``OPENAI_BASE_URL`` and of
  the model provider its ``config.toml`` selects (``model_provider`` and its
  ``base_url``, where a user points Codex at another endpoint), else api.openai.com and
  chatgpt.com. Its own sandbox is turned ``off`` inside ours
  (``--sandbox danger-full-access``, see :data:`CONFINED_ENV`): its network-off
  namespace would cut its commands off our proxy (allowed hosts included), and its
  helper lives under ``CODEX_HOME`` where a temporary folder makes every command fail.
- ``local``: the battle's ``.pokeralph/battles/{task}/sessions`` folder read-write (the
  only hole in the read-only ``.pokeralph/``); the model server is the caller's to add.
- ``command`` and ``demo``: nothing beyond the working tree.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

# Set by the daemon in a run's own environment (never from agent.env) when our sandbox
# confines the run: a backend whose CLI sandboxes itself turns its own off.
CONFINED_ENV = "POKERALPH_SANDBOX"
OwnSandbox = Literal["none", "keep", "off"]
MAX_CONFIG = 1 << 20  # bytes of a CLI's config file read for its model endpoint


@dataclass(frozen=True, slots=True)
class BackendNeeds:
    """What one backend's run needs beyond its working tree."""

    backend: str
    read_write: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    model_hosts: tuple[str, ...] = ()  # host:port patterns the proxy lets through
    own_sandbox: OwnSandbox = "none"
    folders: tuple[Path, ...] = ()  # of read_write: made before the run when absent


def needs_for(backend: str, env: Mapping[str, str], home: Path) -> BackendNeeds:
    """The needs of ``backend`` for a run with environment ``env`` (the agent's config
    env and the daemon's run env merged) and home folder ``home``."""
    if backend == "claude":
        config_dir = env.get("CLAUDE_CONFIG_DIR")
        state = Path(config_dir) if config_dir else home / ".claude"
        paths = (state,) if config_dir else (state, home / ".claude.json")
        return BackendNeeds(
            backend,
            read_write=paths,
            model_hosts=_hosts(env.get("ANTHROPIC_BASE_URL"), ("api.anthropic.com",)),
            own_sandbox="keep",
            folders=(state,),
        )
    if backend == "codex":
        codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
        hosts = _hosts(env.get("OPENAI_BASE_URL"), ()) + _hosts(_codex_base_url(codex_home), ())
        return BackendNeeds(
            backend,
            read_write=(codex_home,),
            model_hosts=tuple(dict.fromkeys(hosts)) or ("api.openai.com", "chatgpt.com"),
            own_sandbox="off",
            folders=(codex_home,),
        )
    if backend == "local":
        root, task = env.get("POKERALPH_REPO_PATH"), env.get("POKERALPH_TASK_ID")
        if root and task and os.sep not in task and task not in (".", ".."):
            sessions = Path(root) / ".pokeralph" / "battles" / task / "sessions"
            return BackendNeeds(backend, read_write=(sessions,), folders=(sessions,))
        return BackendNeeds(backend)
    return BackendNeeds(backend)


def _codex_base_url(codex_home: Path) -> str | None:
    """The ``base_url`` of the model provider ``CODEX_HOME/config.toml`` selects (its
    ``model_provider``, else ``openai``), or None: no file, not TOML, none named. The
    file is the user's; read at most :data:`MAX_CONFIG` bytes of it."""
    try:
        with (codex_home / "config.toml").open("rb") as f:
            config = tomllib.loads(f.read(MAX_CONFIG).decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    providers = config.get("model_providers")
    name = config.get("model_provider", "openai")
    if not isinstance(providers, dict) or not isinstance(name, str):
        return None
    provider = providers.get(name)
    url = provider.get("base_url") if isinstance(provider, dict) else None
    return url if isinstance(url, str) else None


def url_hosts(base_url: str | None) -> tuple[str, ...]:
    """``host:port`` of a model server's URL (its scheme's port when it names none), for
    a backend whose endpoint the caller knows (``agent.local.baseUrl``)."""
    return _hosts(base_url, ()) if base_url else ()


def _hosts(base_url: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """``host:port`` of ``base_url`` (its scheme's port when it names none), else
    ``default`` (ports 80 and 443)."""
    if not base_url:
        return default
    try:
        url = urlsplit(base_url)
        host, port = url.hostname, url.port
    except ValueError:
        return default
    if not host:
        return default
    port = port or (80 if url.scheme == "http" else 443)
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}",)
