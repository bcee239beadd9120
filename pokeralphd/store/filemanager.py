"""FileManager: the ``.pokeralph/`` folder of one repository, laid out as the seed says.

::

    .pokeralph/
    ├── config.json                 repository config layer (only the keys it sets)
    ├── prd.json                    PRD with its tasks
    ├── battles/{taskId}/
    │   ├── progress.json           live progress (the daemon is its only writer)
    │   ├── history.json            the battle and its iterations
    │   ├── logs/iteration-{n}.log  what the agent printed
    │   ├── verification/report-{n}.json, log-{n}.log   the QA agent's (seed 003)
    │   └── review/report-{n}.json, log-{n}.log         the reviewer's
    └── daemon.lock                 held by the daemon that owns this repository

All methods are synchronous and do plain file I/O, reading a document again before each
save (its version and validity); they serve tools, tests and start-up. The daemon's
own writes of the PRD and of a battle's history and progress go through the repository
store, which keeps them in memory and writes them by group commit
(:mod:`pokeralphd.store.commit`). Task ids are validated before any path is built.
Nothing here follows a symbolic link (:mod:`pokeralph_core.safefs`): an agent can write
anything in the repository, ``.pokeralph/`` included, and a planted link is refused with
a :class:`StorageError` naming it instead of being read or written through.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from pokeralph_core import documents, safefs
from pokeralph_core.atomic import append_bytes, atomic_write, sweep
from pokeralph_core.documents import DocumentKind, Loaded
from pokeralphd.domain.ids import validate_task_id
from pokeralphd.domain.models import PRD, Battle, Progress
from pokeralphd.domain.reports import ReviewReport, VerificationReport

if TYPE_CHECKING:
    from pathlib import Path

FOLDER = ".pokeralph"
ReportPhase = Literal["verification", "review"]


def _history_v1_to_v2(body: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 (seed 003) adds phases, cycles, escalations and blocks: a battle of
    schema 1 ran its implementation alone (a completed one is done)."""
    out = dict(body)
    out.setdefault("phases", ["implementation"])
    out.setdefault("phase", "done" if body.get("status") == "completed" else "implementation")
    return out


def _same_shape(body: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 of the PRD adds the task statuses ``blocked`` and ``escalated``: a file of
    schema 1 is valid as it is (the bump keeps an older daemon from misreading a newer
    file)."""
    return body


PRD_KIND = DocumentKind("prd", PRD, 2, {1: _same_shape})
PROGRESS_KIND = DocumentKind("progress", Progress)
HISTORY_KIND = DocumentKind("history", Battle, 2, {1: _history_v1_to_v2})
VERIFICATION_KIND = DocumentKind("verification-report", VerificationReport)
REVIEW_KIND = DocumentKind("review-report", ReviewReport)
REPORT_KINDS: dict[str, DocumentKind[Any]] = {
    "verification": VERIFICATION_KIND,
    "review": REVIEW_KIND,
}
OWN_FOLDERS = ("battles", "inbox", "planning")  # what the daemon writes below .pokeralph/
GITIGNORE = """# Written by pokeralphd: runtime files stay out of git.
# config.json and prd.json may be committed.
daemon.lock
approval-usage.json
battles/
inbox/
planning/
.*.tmp
"""


class FileManager:
    """Reads and writes one repository's ``.pokeralph/`` folder."""

    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self.dir = repo_root / FOLDER

    # -- layout
    @property
    def config_path(self) -> Path:
        return self.dir / "config.json"

    @property
    def prd_path(self) -> Path:
        return self.dir / "prd.json"

    @property
    def lock_path(self) -> Path:
        return self.dir / "daemon.lock"

    def battle_dir(self, task_id: str) -> Path:
        return self.dir / "battles" / validate_task_id(task_id)

    def progress_path(self, task_id: str) -> Path:
        return self.battle_dir(task_id) / "progress.json"

    def history_path(self, task_id: str) -> Path:
        return self.battle_dir(task_id) / "history.json"

    def report_path(self, task_id: str, phase: ReportPhase, cycle: int) -> Path:
        if phase not in REPORT_KINDS:
            raise ValueError(f"no reports of phase {phase!r}")
        if not isinstance(cycle, int) or cycle < 1:
            raise ValueError(f"cycle must be a positive integer, got {cycle!r}")
        return self.battle_dir(task_id) / phase / f"report-{cycle}.json"

    def role_log_path(self, task_id: str, phase: ReportPhase, cycle: int) -> Path:
        return self.report_path(task_id, phase, cycle).with_name(f"log-{cycle}.log")

    def log_path(self, task_id: str, iteration: int) -> Path:
        if not isinstance(iteration, int) or iteration < 1:
            raise ValueError(f"iteration must be a positive integer, got {iteration!r}")
        return self.battle_dir(task_id) / "logs" / f"iteration-{iteration}.log"

    # -- initialisation
    def init(self) -> list[Path]:
        """Create the folder, an empty config layer and a .gitignore; keep what exists.

        Runs at every start, with the repository lock held: ``.pokeralph`` must be a real
        folder of ours, temp files of writes killed half-way are removed (returned), and
        a link in what the daemon keeps there is refused (:class:`StorageError` naming
        it), so a planted link makes the repository unavailable with a clear message at
        once. Only the folder's own files and the sub-folders we write (``OWN_FOLDERS``)
        are looked into: a folder another part may keep there later (a worktree, with the
        repository's own links and files) is left alone.
        """
        safefs.makedirs(self.dir / "battles")
        removed, link = sweep(self.dir, exclusive=True)
        for sub in OWN_FOLDERS:
            gone, found = sweep(self.dir / sub, recursive=True, exclusive=True)
            removed += gone
            link = link or found
        if link is not None:
            raise safefs.link_refused(link)
        if not safefs.is_file(self.config_path):
            atomic_write(self.config_path, b'{\n  "schemaVersion": 1,\n  "version": 1\n}\n')
        ignore = self.dir / ".gitignore"
        if not safefs.is_file(ignore):
            atomic_write(ignore, GITIGNORE.encode(), mode=0o644)
        return removed

    # -- PRD
    def load_prd(self) -> Loaded[PRD] | None:
        return documents.load(PRD_KIND, self.prd_path)

    # -- battles
    def create_battle_folder(self, task_id: str) -> Path:
        folder = self.battle_dir(task_id)
        safefs.makedirs(folder / "logs")
        return folder

    def load_progress(self, task_id: str) -> Loaded[Progress] | None:
        return documents.load(PROGRESS_KIND, self.progress_path(task_id))

    def load_history(self, task_id: str) -> Loaded[Battle] | None:
        return documents.load(HISTORY_KIND, self.history_path(task_id))

    # -- reports (seed 003), one per cycle, atomic and versioned
    def load_report(
        self, task_id: str, phase: ReportPhase, cycle: int
    ) -> Loaded[VerificationReport] | Loaded[ReviewReport] | None:
        return documents.load(REPORT_KINDS[phase], self.report_path(task_id, phase, cycle))

    def save_report(self, phase: ReportPhase, report: VerificationReport | ReviewReport) -> int:
        path = self.report_path(report.task_id, phase, report.cycle)
        safefs.makedirs(path.parent)
        return documents.save(REPORT_KINDS[phase], path, report)

    def battle_task_ids(self) -> list[str]:
        out = []
        for name in safefs.listdir(self.dir / "battles"):
            try:
                out.append(validate_task_id(name))
            except ValueError:
                continue
        return out

    # -- logs
    def append_log(self, task_id: str, iteration: int, data: bytes) -> None:
        append_bytes(self.log_path(task_id, iteration), data)

    def read_log(
        self, task_id: str, iteration: int, offset: int = 0, limit: int = 256 * 1024
    ) -> tuple[bytes, int]:
        """``limit`` bytes from ``offset`` (negative: from the end) and the file's size."""
        path = self.log_path(task_id, iteration)
        with os.fdopen(safefs.open_file(path, os.O_RDONLY), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size + offset) if offset < 0 else min(offset, size)
            handle.seek(start)
            return handle.read(limit), size
