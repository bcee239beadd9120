"""Installing the local agent's read-only default rules into the user's config layer:
the daemon's job (it is the one writer of that file). The rules themselves, and the
state document that says which were offered, are shared with the agent
(:mod:`pokeralph_core.local_defaults`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pokeralph_core import documents
from pokeralph_core.errors import PokeralphError
from pokeralph_core.local_defaults import (
    DEFAULT_RULES,
    DEFAULTS_VERSION,
    STATE_FILE,
    STATE_KIND,
    LocalAgentState,
)
from pokeralphd.store.rules import add_to_user_layer

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)


def install_defaults(user_config: Path, state_dir: Path) -> list[str]:
    """Add the default rules not yet offered to the user's config layer; their ids.

    A rule the layer already has (same id) is left as it is. Failures (a broken user
    config, a concurrent write) are logged and retried at the next start."""
    state_path = state_dir / STATE_FILE
    try:
        loaded = documents.load(STATE_KIND, state_path)
        state = loaded.value if loaded else LocalAgentState()
        if state.default_rules_installed >= DEFAULTS_VERSION:
            return []
        added = add_to_user_layer(
            user_config,
            [rule for since, rule in DEFAULT_RULES if since > state.default_rules_installed],
        )
        documents.save(
            STATE_KIND, state_path, LocalAgentState(default_rules_installed=DEFAULTS_VERSION)
        )
    except PokeralphError as exc:
        log.warning("the local agent's default rules were not installed: %s", exc.message)
        return []
    return added
