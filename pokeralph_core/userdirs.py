"""Where the daemon keeps things: socket, user state (registry, logs), user config; the
local agent finds its sessions and the daemon's socket with the same object.

Passed around as one object (never read from globals), so tests point everything at
temporary folders through the ordinary XDG variables or explicit arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

from pokeralph_core.paths import socket_path

APP = "pokeralph"


@dataclass(frozen=True)
class Paths:
    socket: Path
    state_dir: Path
    config_dir: Path

    @property
    def user_config_file(self) -> Path:
        return self.config_dir / "config.json"

    @property
    def registry_file(self) -> Path:
        return self.state_dir / "registry.json"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @classmethod
    def resolve(cls, socket: str | Path | None = None) -> Paths:
        """Socket per ``pokeralph_core.paths``; state and config per platformdirs (XDG-aware)."""
        return cls(
            socket=Path(socket_path(socket)),
            state_dir=Path(platformdirs.user_state_dir(APP)),
            config_dir=Path(platformdirs.user_config_dir(APP)),
        )
