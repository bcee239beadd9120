"""The user's registry of repositories, as a document: each entry a repository root
(absolute, resolved) and a short unique name."""

from __future__ import annotations

import re

from pydantic import Field

from pokeralph_core.timeutil import Timestamp, utcnow
from pokeralphd.domain.models import Model

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RepoEntry(Model):
    name: str = Field(pattern=NAME_RE.pattern)
    path: str
    registered_at: Timestamp = Field(default_factory=utcnow)


class Registry(Model):
    repos: list[RepoEntry] = Field(default_factory=list)

    def by_name(self, name: str) -> RepoEntry | None:
        return next((r for r in self.repos if r.name == name), None)

    def by_path(self, path: str) -> RepoEntry | None:
        return next((r for r in self.repos if r.path == path), None)

    def unique_name(self, wanted: str) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", wanted).strip("-.") or "repo"
        base = base[:56]
        if not base[0].isalnum():
            base = "r" + base
        name, n = base, 2
        while self.by_name(name):
            name = f"{base}-{n}"
            n += 1
        return name
