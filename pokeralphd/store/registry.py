"""The user's registry of repositories on disk: ``{state dir}/registry.json``.

Written atomically with a version like every other document, so it survives crashes and
restarts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralph_core import documents
from pokeralph_core.atomic import remove_stale_temp_files
from pokeralph_core.documents import DocumentKind
from pokeralphd.domain.registry import Registry, RepoEntry

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["REGISTRY_KIND", "Registry", "RegistryStore", "RepoEntry"]

REGISTRY_KIND = DocumentKind("registry", Registry)


class RegistryStore:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "registry.json"

    def load(self) -> Registry:
        """The registry (empty if none yet); first, temp files of writes a killed daemon
        left half-way are removed."""
        remove_stale_temp_files(self.path.parent)
        loaded = documents.load(REGISTRY_KIND, self.path)
        return loaded.value if loaded else Registry()

    def save(self, registry: Registry) -> None:
        documents.save(REGISTRY_KIND, self.path, registry)
