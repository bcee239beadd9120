"""``python -m pokeralphd.contract [ROOT]``: write ``shared/`` (the protocol contract) from
the code: the method table and ``pokeralphd.protocol.contract``'s schemas.

Run it after changing a method, an event or a document; a test regenerates the files
and fails on any drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pokeralphd.protocol.contract import render
from pokeralphd.server.methods import build_table


def write(root: Path) -> list[Path]:
    written = []
    for rel, content in render(build_table().methods.values()).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    return written


if __name__ == "__main__":
    target = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "shared"
    )
    for changed in write(target):
        print(f"wrote {changed}")
