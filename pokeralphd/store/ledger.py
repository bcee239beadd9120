"""The daemon-wide cost ledger: every iteration's cost and token usage, appended durably.

One JSON line per iteration in ``{state}/ledger/ledger-YYYY-MM.jsonl`` (a file a month,
so no file grows without bound and old months can be archived by hand). The first line
of each file is its header, ``{"schemaVersion": 1, "kind": "pokeralph-ledger"}``; each
entry says when, which repository, task, battle attempt and iteration, the backend and
model, the phase (implementation, or the role that judged it: verification, review),
the cost in USD and the tokens. A line without ``phase`` is an implementation run. The daemon is the only writer: an entry is
appended and fsynced before the iteration's end is published, so the ledger always holds
what ``battle history`` shows.

A line cut short by a crash (the last one of a file) is skipped with a warning when the
ledger is read, and the next append starts on a fresh line. Totals (per day, repository,
task, backend, model and phase) are kept in memory from the files read at start plus what
is appended since: a query never rereads the files.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pokeralphd.errors import CorruptFile, StorageError
from pokeralphd.protocol.results import SpendTotals

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)

LEDGER_VERSION = 1
HEADER = {"schemaVersion": LEDGER_VERSION, "kind": "pokeralph-ledger"}
GroupBy = Literal["day", "repo", "task", "backend", "model", "phase"]
Cell = tuple[str, str, str, str, str, str]  # (day, repo, task, backend, model, phase)
TOKEN_KEYS = (
    "inputTokens",
    "outputTokens",
    "cacheCreationInputTokens",
    "cacheReadInputTokens",
    "reasoningOutputTokens",
)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    at: datetime  # when the iteration ended (UTC)
    repo: str
    task_id: str
    attempt: int
    iteration: int
    backend: str
    model: str | None
    cost_usd: float
    tokens: dict[str, int] = field(default_factory=dict)
    # implementation, or the role that judged the iteration (verification, review)
    phase: str = "implementation"

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "repo": self.repo,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "iteration": self.iteration,
            "backend": self.backend,
            "model": self.model,
            "costUsd": self.cost_usd,
            "tokens": {k: v for k, v in self.tokens.items() if v},
            "phase": self.phase,
        }

    @classmethod
    def from_json(cls, raw: Any) -> LedgerEntry:
        if not isinstance(raw, dict):
            raise ValueError("an entry must be a JSON object")
        cost = raw.get("costUsd")
        tokens = raw.get("tokens") or {}
        if not isinstance(cost, int | float) or isinstance(cost, bool) or cost < 0:
            raise ValueError("costUsd must be a number >= 0")
        if not isinstance(tokens, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in tokens.values()
        ):
            raise ValueError("tokens must map names to counts")
        at = datetime.fromisoformat(str(raw["at"]).replace("Z", "+00:00"))
        if at.tzinfo is None:
            raise ValueError("at must carry a timezone")
        return cls(
            at=at,
            repo=str(raw["repo"]),
            task_id=str(raw["taskId"]),
            attempt=int(raw["attempt"]),
            iteration=int(raw["iteration"]),
            backend=str(raw["backend"]),
            model=raw.get("model") if isinstance(raw.get("model"), str) else None,
            cost_usd=float(cost),
            tokens={str(k): int(v) for k, v in tokens.items()},
            phase=str(raw.get("phase") or "implementation"),
        )

    def key(self, group: GroupBy) -> str:
        if group == "day":
            return self.at.astimezone(UTC).date().isoformat()
        if group == "repo":
            return self.repo
        if group == "task":
            return f"{self.repo}/{self.task_id}"
        if group == "backend":
            return self.backend
        if group == "phase":
            return self.phase
        return self.model or "(default)"


@dataclass
class Totals:
    cost_usd: float = 0.0
    iterations: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))

    def add(self, entry: LedgerEntry) -> None:
        self.cost_usd += entry.cost_usd
        self.iterations += 1
        for name, count in entry.tokens.items():
            self.tokens[name] = self.tokens.get(name, 0) + count

    def spend(self) -> SpendTotals:
        """As the wire shows them (the cost rounded to a millionth of a dollar)."""
        return SpendTotals(
            cost_usd=float(round(self.cost_usd, 6)),
            iterations=self.iterations,
            tokens=dict(self.tokens),
        )


def _month_file(folder: Path, at: datetime) -> Path:
    return folder / f"ledger-{at.astimezone(UTC):%Y-%m}.jsonl"


class Ledger:
    """The ledger of one daemon. ``load`` and ``append`` do blocking I/O (call them from
    a worker thread); the queries only read the totals in memory, which the event loop
    may do: they wait for no disk (the file lock and the totals' lock are two locks)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._file_lock = threading.Lock()  # one append (or the load) at a time
        self._lock = threading.Lock()  # the totals
        # (day, repo, task, backend, model, phase) -> totals, for filtered queries
        self._cells: dict[Cell, Totals] = defaultdict(Totals)
        self.skipped = 0  # lines that did not parse (a crash cut one short, a hand edit)

    # -- reading
    def load(self) -> None:
        """Read every month's file into the totals. The file lock is held throughout, so
        no append lands between the reading and the counting (its entry would be counted,
        then cleared); queries wait only for the counting."""
        entries: list[LedgerEntry] = []
        skipped = 0
        with self._file_lock:
            if self.folder.is_dir():
                for path in sorted(self.folder.glob("ledger-*.jsonl")):
                    read, bad = self._read(path)
                    entries += read
                    skipped += bad
            with self._lock:
                self._cells.clear()
                self.skipped = skipped
                for entry in entries:
                    self._count(entry)

    def _read(self, path: Path) -> tuple[list[LedgerEntry], int]:
        """The file's entries, and how many lines were skipped."""
        entries = []
        skipped = 0
        with path.open("rb") as handle:
            lines = handle.read().split(b"\n")
        if not lines or not lines[0].strip():
            return [], 0
        try:
            header = json.loads(lines[0])
        except ValueError as exc:
            raise CorruptFile(
                path, f"the ledger header is not JSON: {exc}", "schemaVersion"
            ) from exc
        version = header.get("schemaVersion") if isinstance(header, dict) else None
        if version != LEDGER_VERSION:
            raise CorruptFile(
                path,
                f"ledger version {version!r} is not one this daemon reads ({LEDGER_VERSION})",
                "schemaVersion",
            )
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                entries.append(LedgerEntry.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                skipped += 1
                log.warning("ledger %s line %d skipped: %s", path, number, exc)
        return entries, skipped

    # -- writing
    def append(self, entry: LedgerEntry) -> None:
        """Append ``entry`` durably (fsync), then count it."""
        line = json.dumps(entry.to_json(), separators=(",", ":"), ensure_ascii=False) + "\n"
        path = _month_file(self.folder, entry.at)
        with self._file_lock:
            try:
                self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(
                    path,
                    os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                )
                try:
                    size = os.fstat(fd).st_size
                    data = line.encode()
                    if size == 0:
                        data = (json.dumps(HEADER) + "\n").encode() + data
                    elif _last_byte(fd, size) != b"\n":
                        data = b"\n" + data  # a crash cut the last line short
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise StorageError(
                    f"could not append to the cost ledger {path}: {exc.strerror or exc}",
                    file=str(path),
                    errno=exc.errno,
                ) from exc
        with self._lock:
            self._count(entry)

    def _count(self, entry: LedgerEntry) -> None:
        cell = (
            entry.key("day"),
            entry.repo,
            entry.task_id,
            entry.backend,
            entry.key("model"),
            entry.phase,
        )
        self._cells[cell].add(entry)

    # -- queries
    def summary(
        self,
        by: GroupBy,
        *,
        since: str | None = None,
        until: str | None = None,
        repo: str | None = None,
    ) -> tuple[dict[str, Totals], Totals]:
        """Totals by ``by`` (days as ``YYYY-MM-DD``, inclusive bounds), and the grand
        total, optionally for one repository."""
        out: dict[str, Totals] = defaultdict(Totals)
        total = Totals()
        for cell, totals in self._select(since, until, repo):
            _merge(out[_cell_key(cell, by)], totals)
            _merge(total, totals)
        return dict(sorted(out.items())), total

    def breakdown(
        self,
        by: GroupBy,
        split: GroupBy,
        *,
        since: str | None = None,
        until: str | None = None,
        repo: str | None = None,
    ) -> dict[str, dict[str, Totals]]:
        """Totals by ``by``, each split by ``split`` (each day's repositories, say), with
        the same bounds as :meth:`summary`; keys sorted at both levels."""
        out: dict[str, dict[str, Totals]] = defaultdict(lambda: defaultdict(Totals))
        for cell, totals in self._select(since, until, repo):
            _merge(out[_cell_key(cell, by)][_cell_key(cell, split)], totals)
        return {key: dict(sorted(parts.items())) for key, parts in sorted(out.items())}

    def _select(
        self, since: str | None, until: str | None, repo: str | None
    ) -> list[tuple[Cell, Totals]]:
        """The cells within the days and the repository asked (a copy, read under lock)."""
        with self._lock:
            cells = list(self._cells.items())
        return [
            (cell, totals)
            for cell, totals in cells
            if not ((since and cell[0] < since) or (until and cell[0] > until))
            and (repo is None or cell[1] == repo)
        ]

    def day_total(self, day: str, repo: str | None = None) -> Totals:
        return self.summary("day", since=day, until=day, repo=repo)[1]


def _cell_key(cell: Cell, by: GroupBy) -> str:
    """A cell's key by ``by`` (a task's is ``repo/task``)."""
    day, repo, task, backend, model, phase = cell
    if by == "task":
        return f"{repo}/{task}"
    return {"day": day, "repo": repo, "backend": backend, "model": model, "phase": phase}[by]


def _merge(into: Totals, other: Totals) -> None:
    into.cost_usd += other.cost_usd
    into.iterations += other.iterations
    for name, count in other.tokens.items():
        into.tokens[name] = into.tokens.get(name, 0) + count


def _last_byte(fd: int, size: int) -> bytes:
    return os.pread(fd, 1, size - 1)
