"""Benchmark plumbing: a daemon on a temp socket, timing helpers, the result table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.helpers import DaemonProcess, short_tmpdir


@dataclass
class Table:
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, value: str, note: str = "") -> None:
        self.rows.append((name, value, note))
        print(f"  {name:<58} {value:>16}  {note}", flush=True)

    def markdown(self) -> str:
        out = ["| measure | value | note |", "|---|---:|---|"]
        out += [f"| {a} | {b} | {c} |" for a, b, c in self.rows]
        return "\n".join(out)


def start_daemon(*args: str) -> DaemonProcess:
    """A daemon as a user runs it: with the dashboard (the tests' default is without)."""
    return DaemonProcess(short_tmpdir("prb"), list(args), web=True, fork=False).start()


def timed(func: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        func()
        out.append(time.perf_counter() - t0)
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"
