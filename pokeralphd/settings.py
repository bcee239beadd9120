"""Daemon-wide settings (limits), from command-line flags and the user config file's
``daemon`` section; separate from the per-repository battle config."""

from __future__ import annotations

from pydantic import Field

from pokeralphd.domain.models import Model


class DaemonSettings(Model):
    max_message: int = Field(default=1 << 20, ge=1024, le=64 << 20)
    max_subscriber_backlog: int = Field(default=8 << 20, ge=64 << 10, le=256 << 20)
    event_history: int = Field(default=10_000, ge=100, le=1_000_000)
    max_concurrent_battles: int = Field(default=4, ge=1, le=64)
    debug_methods: bool = False  # debug.emit, for the fan-out benchmark
