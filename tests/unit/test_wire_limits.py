"""The wire's bounds, part by part: framing, decoding, the event history, the discover
cache, the outbox's writes, the accept loop and the settings that document them."""

from __future__ import annotations

from pokeralphd.settings import DaemonSettings

# ----------------------------------------------------------------------- settings


def test_every_limit_is_documented() -> None:
    import pokeralphd.settings as module

    doc = module.__doc__ or ""
    for name, field in DaemonSettings.model_fields.items():
        if name in ("max_concurrent_battles", "debug_methods"):
            continue
        assert field.description, f"{name} has no description"
        assert field.alias and field.alias in doc, f"{name} is missing from the table"
    defaults = DaemonSettings()
    assert (defaults.max_batch, defaults.max_reply, defaults.max_pending) == (1000, 16 << 20, 64)
    assert defaults.event_history_bytes == 32 << 20 and defaults.max_connections == 1024
