"""GitService on GitPython: what an iteration changed, commits of exactly those files,
and reverting a battle's last commit.

``snapshot()`` before an iteration and ``changed_since()`` after it give the files the
iteration touched, so the user's own uncommitted edits are never swept into a commit.
``.pokeralph/`` stays out unless asked. Synchronous: callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import subprocess
from typing import TYPE_CHECKING

import git

from pokeralphd.errors import InvalidState, StorageError

if TYPE_CHECKING:
    from pathlib import Path

RUNTIME = ".pokeralph"
FALLBACK_NAME = "pokeralph"
FALLBACK_EMAIL = "pokeralph@localhost"


class GitService:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root

    def _repo(self) -> git.Repo:
        try:
            return git.Repo(self.root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise InvalidState(f"{self.root} is not a git repository", path=str(self.root)) from exc

    def head(self) -> str | None:
        repo = self._repo()
        try:
            return repo.head.commit.hexsha
        except ValueError:
            return None

    @staticmethod
    def format_commit_message(task_id: str, title: str) -> str:
        return f"[PokéRalph] {task_id}: {title}"

    def _dirty(self, include_runtime: bool = False) -> list[str]:
        """Paths that differ from HEAD: modified, deleted, untracked (not ignored)."""
        repo = self._repo()
        out = repo.git.status("--porcelain", "-z", "--untracked-files=all")
        paths: list[str] = []
        entries = out.split("\0")
        i = 0
        while i < len(entries):
            entry = entries[i]
            i += 1
            if len(entry) < 4:
                continue
            status, path = entry[:2], entry[3:]
            if status[0] in "RC":
                i += 1  # the rename's source follows
            paths.append(path)
        if not include_runtime:
            paths = [p for p in paths if p != RUNTIME and not p.startswith(RUNTIME + "/")]
        return sorted(set(paths))

    def _fingerprint(self, path: str) -> str:
        full = self.root / path
        try:
            if full.is_symlink():
                return "link:" + str(full.readlink())
            if full.is_file():
                return hashlib.sha1(full.read_bytes()).hexdigest()
        except OSError:
            return "unreadable"
        return "missing" if not full.exists() else "dir"

    def snapshot(self) -> dict[str, str]:
        """Each currently changed path and a fingerprint of its content."""
        return {path: self._fingerprint(path) for path in self._dirty()}

    def changed_since(self, snapshot: dict[str, str]) -> list[str]:
        """Paths whose state changed since ``snapshot`` (what the iteration touched)."""
        now = self._dirty()
        changed = [p for p in now if snapshot.get(p) != self._fingerprint(p)]
        # A path dirty before and clean now was reverted by the iteration: that is a change too.
        changed += [p for p in snapshot if p not in now]
        return sorted(set(changed))

    def _author(self, repo: git.Repo) -> git.Actor | None:
        reader = repo.config_reader()
        name = reader.get_value("user", "name", default="")
        email = reader.get_value("user", "email", default="")
        if name and email:
            return None  # the user's identity applies
        return git.Actor(FALLBACK_NAME, FALLBACK_EMAIL)

    def commit(self, paths: list[str], message: str, include_runtime: bool = False) -> str | None:
        """Stage exactly ``paths`` (deletions too) and commit; the new hash, or None if nothing changed."""
        repo = self._repo()
        if not include_runtime:
            paths = [p for p in paths if p != RUNTIME and not p.startswith(RUNTIME + "/")]
        if not paths:
            return None
        try:
            repo.git.add("-A", "--", *paths)
            staged = (
                repo.git.diff("--cached", "--name-only", "--", *paths).strip()
                if self.head()
                else "x"
            )
            if not staged:
                return None
            actor = self._author(repo)
            args = ["-m", message, "--no-verify", "--", *paths]
            if actor is not None:
                env = {
                    "GIT_AUTHOR_NAME": actor.name or FALLBACK_NAME,
                    "GIT_AUTHOR_EMAIL": actor.email or FALLBACK_EMAIL,
                    "GIT_COMMITTER_NAME": actor.name or FALLBACK_NAME,
                    "GIT_COMMITTER_EMAIL": actor.email or FALLBACK_EMAIL,
                }
                with repo.git.custom_environment(**env):
                    repo.git.commit(*args)
            else:
                repo.git.commit(*args)
        except git.GitCommandError as exc:
            raise StorageError(
                f"git commit failed: {exc.stderr.strip() or exc}", paths=paths[:20]
            ) from exc
        return repo.head.commit.hexsha

    def show(self, commit: str, limit: int, timeout: float = 30.0) -> tuple[str, bool]:
        """``git show`` of ``commit`` (stat and patch, no external diff or textconv), at most
        ``limit`` bytes of it (read no further: a huge commit costs nothing), and whether it
        was cut."""
        args = ["git", "-C", str(self.root), "show", "--no-color", "--no-ext-diff"]
        args += ["--no-textconv", "--stat", "--patch", "--format=fuller", commit, "--"]
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            data = proc.stdout.read(limit + 1)
            truncated = len(data) > limit
            if truncated:
                proc.kill()
            try:
                err = proc.stderr.read(4096) if not truncated else b""
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        if code != 0 and not truncated:
            message = err.decode(errors="replace").strip() or f"git show exited with {code}"
            raise InvalidState(f"cannot show commit {commit[:12]}: {message}", commit=commit)
        return data[:limit].decode(errors="replace"), truncated

    def revert_last(self, expected_message_prefix: str | None) -> str:
        """Undo HEAD with a new revert commit, if HEAD is the expected PokéRalph commit."""
        repo = self._repo()
        try:
            head = repo.head.commit
        except ValueError as exc:
            raise InvalidState("the repository has no commits to revert") from exc
        subject = str(head.message).splitlines()[0] if head.message else ""
        if expected_message_prefix and not subject.startswith(expected_message_prefix):
            raise InvalidState(
                f"HEAD ({head.hexsha[:10]} “{subject[:60]}”) is not a PokéRalph commit of this task; "
                "revert it by hand with `git revert`",
                head=head.hexsha,
            )
        actor = self._author(repo)
        try:
            if actor is not None:
                with repo.git.custom_environment(
                    GIT_AUTHOR_NAME=FALLBACK_NAME,
                    GIT_AUTHOR_EMAIL=FALLBACK_EMAIL,
                    GIT_COMMITTER_NAME=FALLBACK_NAME,
                    GIT_COMMITTER_EMAIL=FALLBACK_EMAIL,
                ):
                    repo.git.revert("--no-edit", head.hexsha)
            else:
                repo.git.revert("--no-edit", head.hexsha)
        except git.GitCommandError as exc:
            raise InvalidState(f"git revert failed: {exc.stderr.strip() or exc}") from exc
        return repo.head.commit.hexsha
