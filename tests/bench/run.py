"""Run the benchmarks and print one table (markdown too, for the README)."""

from __future__ import annotations

import importlib
import sys

from tests.bench.common import Table

ALL = [
    "cli",
    "ping",
    "fanout",
    "scale",
    "battle",
    "parallel",
    "latency",
    "attacks",
    "writes",
    "web",
    "localagent",
    "iteration",
    "stream",
]


def main(argv: list[str]) -> int:
    wanted = argv or ALL
    table = Table()
    for name in wanted:
        try:
            module = importlib.import_module(f"tests.bench.bench_{name}")
        except ModuleNotFoundError:
            print(f"no benchmark {name!r}; choose from {', '.join(ALL)}", file=sys.stderr)
            return 2
        print(f"[{name}]", flush=True)
        module.run(table)
    print()
    print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
