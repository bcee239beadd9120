"""``python -m pokeralphd.contract [ROOT]``: write the contract from the code into the
checkout at ROOT (default: the one this package is in): ``shared/`` (OpenRPC, the JSON
Schemas of results, events and documents) and ``pokeralphctl/codes.py``.

Run it after changing a method, an event, a document or an error code; a test
regenerates the files and fails on any drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pokeralphd.protocol.contract import CLIENT_CODES, client_codes, render
from pokeralphd.server.methods import build_table


def contract_files() -> dict[str, str]:
    """Path relative to the checkout -> content, for every generated file."""
    files = {f"shared/{rel}": text for rel, text in render(build_table().methods.values()).items()}
    files[CLIENT_CODES] = client_codes()
    return files


def write(root: Path) -> list[Path]:
    """Write the files that differ under ``root``; the paths written."""
    written = []
    for rel, content in contract_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    for changed in write(target):
        print(f"wrote {changed}")
