"""GitService: what an iteration changed, commits of exactly those files, and reverting a
battle's last commit.

``snapshot()`` before an iteration and ``changed_since()`` after it give the files the
iteration touched, so the user's own uncommitted edits are never swept into a commit.
``.pokeralph/`` stays out unless asked. Synchronous: callers run it in a worker thread.

Every step is one ``git`` command through GitPython's command runner (``git.Git``). No
``git.Repo`` is built: a Repo starts two long-lived ``git cat-file`` children the first
time an object is read, so a Repo per call (as this once did) left two processes per
question behind until the garbage collector came.

GitPython is imported when a repository is first asked something (:func:`_gitpython`): it
is a sixth of the daemon's imports (~0.1 s), and a daemon that only answers requests, or a
client that only reads, never needs it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from typing import TYPE_CHECKING

from pokeralphd.errors import InvalidState, StorageError

if TYPE_CHECKING:
    import types
    from collections.abc import Iterator
    from pathlib import Path

    import git

RUNTIME = ".pokeralph"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree
FALLBACK_NAME = "pokeralph"
FALLBACK_EMAIL = "pokeralph@localhost"
FALLBACK_IDENTITY_ENV = {
    "GIT_AUTHOR_NAME": FALLBACK_NAME,
    "GIT_AUTHOR_EMAIL": FALLBACK_EMAIL,
    "GIT_COMMITTER_NAME": FALLBACK_NAME,
    "GIT_COMMITTER_EMAIL": FALLBACK_EMAIL,
}


#: ``git`` arguments printing the user's configured name and email, and :func:`has_identity`
#: judging what they printed: the one rule for when we commit as pokeralph instead.
IDENTITY_QUERY = ("config", "--get-regexp", r"^user\.(name|email)$")


def has_identity(query_output: str) -> bool:
    """Whether git has both a name and an email to commit with (an empty one does not
    count: git refuses to commit with an empty name)."""
    keys = set()
    for line in query_output.splitlines():
        key, _, value = line.partition(" ")
        if value.strip():
            keys.add(key)
    return keys >= {"user.name", "user.email"}


def git_executable() -> str:
    """The git we run ourselves: the one GitPython runs (``$GIT_PYTHON_GIT_EXECUTABLE``),
    else ``git`` on PATH."""
    return os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"


@contextlib.contextmanager
def starting_git() -> Iterator[None]:
    """Around starting a git process: a git that is missing is :func:`cannot_run_git`'s
    error (a missing folder to run it in stays a FileNotFoundError)."""
    try:
        yield
    except FileNotFoundError as exc:
        if exc.filename not in (git_executable(), None):
            raise
        raise cannot_run_git(exc) from exc


def cannot_run_git(exc: Exception) -> InvalidState:
    """The error for a git that is missing or cannot run, with what to do."""
    return InvalidState(
        f"cannot run git: {exc}",
        hint="install git (or set GIT_PYTHON_GIT_EXECUTABLE to it), then retry",
    )


def _gitpython() -> types.ModuleType:
    """GitPython, imported on first use; a missing or broken ``git`` executable (GitPython
    checks it as it is imported) is a clear error, not an internal one."""
    try:
        import git
    except ImportError as exc:
        raise cannot_run_git(exc) from exc
    return git


def _runtime(path: str) -> bool:
    return path == RUNTIME or path.startswith(RUNTIME + "/")


class GitService:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self._cmd: git.Git | None = None

    @property
    def _git(self) -> git.Git:
        """The command runner in the repository (checked to be one the first time, as
        GitPython's Repo does: by its ``.git``, a folder, or a file in a worktree)."""
        if self._cmd is None:
            if not (self.root / ".git").exists():
                raise InvalidState(f"{self.root} is not a git repository", path=str(self.root))
            self._cmd = _gitpython().Git(self.root)
        return self._cmd

    def head(self) -> str | None:
        """HEAD's hash, or None before the first commit."""
        git = _gitpython()
        try:
            return str(self._git.rev_parse("--verify", "-q", "HEAD^{commit}")).strip() or None
        except git.GitCommandError:
            return None

    @staticmethod
    def format_commit_message(task_id: str, title: str) -> str:
        return f"[PokéRalph] {task_id}: {title}"

    def _dirty(self, include_runtime: bool = False) -> list[str]:
        """Paths that differ from HEAD: modified, deleted, untracked (not ignored)."""
        out = self._git.status("--porcelain", "-z", "--untracked-files=all")
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
            paths = [p for p in paths if not _runtime(p)]
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

    def _bounded(self, args: list[str], limit: int) -> str:
        """``git ARGS``' output, at most ``limit`` bytes of it (a huge diff is never held
        whole); the rest is cut and git stopped."""
        with starting_git():
            proc = subprocess.Popen(
                [git_executable(), *args],
                cwd=self.root,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )
        with proc:
            assert proc.stdout is not None
            data = proc.stdout.read(limit + 1)
            if len(data) > limit:
                proc.kill()
                data = data[:limit]
        return data.decode("utf-8", errors="replace")

    def diff(self, base: str | None, limit: int = 256 * 1024) -> tuple[str, str]:
        """``git diff --stat`` and the diff from ``base`` (None: the empty tree) to the
        working tree, ``.pokeralph/`` left out, at most ``limit`` bytes of diff. The
        working tree, not HEAD: with auto-commit off the work is not committed."""
        start = base or EMPTY_TREE
        spec = ["--", ".", f":(exclude){RUNTIME}"]
        stat = self._bounded(["diff", "--no-color", "--stat", start, *spec], 64 * 1024)
        body = self._bounded(["diff", "--no-color", start, *spec], limit)
        dirty = self._dirty()
        known = self._tracked(dirty)
        untracked = [p for p in dirty if p not in known]
        if untracked:
            stat += "\nnew files not yet added to git: " + ", ".join(untracked[:50])
        return stat, body

    def _tracked(self, paths: list[str]) -> set[str]:
        """Which of ``paths`` git knows (in HEAD or in the index)."""
        if not paths:
            return set()
        out = self._git.ls_files("-z", "--", *paths)
        return {p for p in out.split("\0") if p} | self._in_head(paths)

    def _in_head(self, paths: list[str]) -> set[str]:
        """Which of ``paths`` HEAD holds (none before the first commit)."""
        if not self.head():
            return set()
        out = self._git.ls_tree("-r", "-z", "--name-only", "HEAD", "--", *paths)
        return {p for p in out.split("\0") if p}

    def restore(self, paths: list[str]) -> list[str]:
        """Put ``paths`` back as HEAD has them: a tracked path is checked out again (a
        deleted one comes back), one git does not know is removed. The paths put back."""
        git = _gitpython()
        if not paths:
            return []
        cmd = self._git
        in_head = self._in_head(paths)
        done: list[str] = []
        for path in paths:
            if _runtime(path):
                continue
            if path in in_head:
                cmd.checkout("HEAD", "--", path)
                with contextlib.suppress(git.GitCommandError):
                    cmd.reset("-q", "HEAD", "--", path)
            else:
                full = self.root / path
                with contextlib.suppress(git.GitCommandError):
                    cmd.rm("-q", "--cached", "--ignore-unmatch", "--", path)
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(full)
            done.append(path)
        return done

    def _identity(self) -> dict[str, str]:
        """Environment for committing: the user's identity where git has one, else ours
        (a fresh machine or a CI runner has none, and git would refuse to commit)."""
        git = _gitpython()
        try:
            found = str(self._git.config(*IDENTITY_QUERY))
        except git.GitCommandError:  # exit 1: neither is set
            found = ""
        return {} if has_identity(found) else FALLBACK_IDENTITY_ENV

    def _committer(self) -> contextlib.AbstractContextManager[None]:
        """Run the git commands inside with a committer identity (see :meth:`_identity`)."""
        return self._git.custom_environment(**self._identity())

    def commit(self, paths: list[str], message: str, include_runtime: bool = False) -> str | None:
        """Stage exactly ``paths`` (deletions too) and commit; the new hash, or None if nothing changed."""
        git = _gitpython()
        if not include_runtime:
            paths = [p for p in paths if not _runtime(p)]
        if not paths:
            return None
        cmd = self._git
        try:
            cmd.add("-A", "--", *paths)
            # (before the first commit too, against the empty tree)
            if not cmd.diff("--cached", "--name-only", "--", *paths).strip():
                return None
            with self._committer():
                cmd.commit("-m", message, "--no-verify", "--", *paths)
        except git.GitCommandError as exc:
            raise StorageError(
                f"git commit failed: {exc.stderr.strip() or exc}", paths=paths[:20]
            ) from exc
        return self.head()

    def show(self, commit: str, limit: int, timeout: float = 30.0) -> tuple[str, bool]:
        """``git show`` of ``commit`` (stat and patch, no external diff or textconv), at most
        ``limit`` bytes of it (read no further: a huge commit costs nothing), and whether it
        was cut."""
        args = [git_executable(), "-C", str(self.root), "show", "--no-color", "--no-ext-diff"]
        args += ["--no-textconv", "--stat", "--patch", "--format=fuller", commit, "--"]
        with starting_git():
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with proc:
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
        git = _gitpython()
        head = self.head()
        if head is None:
            raise InvalidState("the repository has no commits to revert")
        message = str(self._git.log("-1", "--format=%B", head)).strip()
        subject = message.splitlines()[0] if message else ""
        if expected_message_prefix and not subject.startswith(expected_message_prefix):
            raise InvalidState(
                f"HEAD ({head[:10]} “{subject[:60]}”) is not a PokéRalph commit of this task; "
                "revert it by hand with `git revert`",
                head=head,
            )
        try:
            with self._committer():
                self._git.revert("--no-edit", head)
        except git.GitCommandError as exc:
            raise InvalidState(f"git revert failed: {exc.stderr.strip() or exc}") from exc
        new = self.head()
        assert new is not None
        return new
