"""The config layers as the wire shows them: ``config.get``, ``config.trust``,
``config.getUser`` results, built as the result structs of
:mod:`pokeralphd.protocol.results` (webhook URLs redacted).

:mod:`~pokeralph_core.config.layers` loads and weighs the layers; this module only
shows what it loaded, so the handlers return these structs as they are, without a dict
in between that the wire would convert back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from pokeralph_core.config import layers as config_layers
from pokeralphd.protocol.results import ConfigResult, TrustState, UserConfigResult

if TYPE_CHECKING:
    from pathlib import Path

Layer = Literal["default", "user", "repo"]


def trust_state(trust: config_layers.Trust) -> TrustState:
    """Whether the repository layer applies in full, and what of it waits or applies."""
    ignored = trust.ignored_keys
    return TrustState(
        trusted=trust.trusted,
        hash=trust.hash,
        trusted_hash=trust.trusted_hash,
        sensitive_keys=list(trust.sensitive_keys),
        ignored_keys=ignored,
        tightening_keys=trust.tightening_keys,
        message=trust.message(),
        hint=config_layers.TRUST_HINT if ignored else None,
    )


def config_result(loaded: config_layers.Loaded, version: int | None = None) -> ConfigResult:
    """The ``config.get`` result of ``loaded``; ``version`` as given (the one a write
    produced) or as loaded."""
    return ConfigResult(
        config=config_layers.redacted(loaded.config.dump()),
        # each a layer's name (config_layers.load's sources)
        sources=cast("dict[str, Layer]", loaded.sources),
        repo_layer=config_layers.redacted(loaded.repo_layer),
        version=loaded.version if version is None else version,
        trust=trust_state(loaded.trust),
    )


def user_config_result(user_file: Path, version: int | None = None) -> UserConfigResult:
    """The ``config.getUser`` result: the user's layer (trust records aside) and the
    config it makes with the defaults; ``version`` as given (the one a write produced)
    or as on disk. Blocking: reads the user's file."""
    layer, _, on_disk = config_layers.user_layer(user_file)
    config = config_layers.load(user_file, None).config
    return UserConfigResult(
        config=config_layers.redacted(config.dump()),
        layer=config_layers.redacted(layer),
        version=on_disk if version is None else version,
        path=str(user_file),
    )
