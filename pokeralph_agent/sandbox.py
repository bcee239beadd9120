"""The working directory as a boundary: every path a tool touches is resolved (symbolic
links included) and refused if it leaves the directory.

A path may be relative (to the working directory) or absolute; either way it is joined,
made real with :func:`os.path.realpath` (every existing link followed, ``..`` folded) and
must then be the root or under it. A missing tail is fine (a file to create), its
existing part is what links are resolved in. Writes open the final component with
``O_NOFOLLOW``, so a link planted after the check is not written through.
"""

from __future__ import annotations

import os
from pathlib import Path

from pokeralph_agent.errors import PathEscape, ToolError

MAX_PATH = 4096


class Sandbox:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the root, or :class:`PathEscape`."""
        if not isinstance(path, str):
            raise ToolError(f"a path must be a string, got {type(path).__name__}")
        if "\0" in path:
            raise ToolError("a path cannot contain a NUL character")
        if len(path) > MAX_PATH:
            raise ToolError(f"a path is at most {MAX_PATH} characters")
        text = path.strip() or "."
        joined = os.path.join(self.root, os.path.expanduser(text) if text.startswith("~") else text)
        real = Path(os.path.realpath(joined))
        if not self.contains(real):
            raise PathEscape(
                f"{path!r} is outside the working directory {self.root} "
                f"(it resolves to {real}); use paths inside it"
            )
        return real

    def contains(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    def relative(self, real: Path) -> str:
        """``real`` (already inside) as a path relative to the root, ``.`` for the root."""
        rel = real.relative_to(self.root).as_posix()
        return rel or "."
