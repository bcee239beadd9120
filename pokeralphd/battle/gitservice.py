"""GitService: what an iteration changed, commits of exactly those files, and reverting a
battle's last commit.

``snapshot()`` before an iteration and ``changed_since()`` after it give the files the
iteration touched, so the user's own uncommitted edits are never swept into a commit.
``.pokeralph/`` stays out unless asked. Synchronous: callers run it in a worker thread.

Every step is one ``git`` command run by :mod:`pokeralphd.gitcmd`, the one place the
daemon runs git, with hooks, the fsmonitor, filters, signing, external diff and textconv
of the repository's own making switched off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from pokeralphd import gitcmd, gitfiles
from pokeralphd.errors import InvalidState, StorageError

if TYPE_CHECKING:
    from collections.abc import Mapping

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
#: Paths from `git status` are names, not patterns: without this a file named `*` is
#: every file to `add`, `commit`, `rm --cached` and the others.
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
# What `git commit` says (LC_ALL=C: see gitcmd) when the paths staged differ in nothing.
NOTHING_TO_COMMIT = re.compile(r"^(nothing to commit|no changes added to commit)", re.M)
# The user's identity for commits, per repository: (the config files' stamp, the env).
_identities: dict[Path, tuple[tuple[tuple[str, int, int], ...], Mapping[str, str]]] = {}


def _identity_stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """The files a user's identity can come from, as (path, mtime, size): the system's,
    the global ones, the repository's config files as git finds them (a worktree's own
    ``.git`` file included). Not the ``.git`` folder: every commit changes its mtime."""
    home = Path(os.environ.get("HOME", "~")).expanduser()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [
        Path("/etc/gitconfig"),
        home / ".gitconfig",
        xdg / "git" / "config",
        *(gitfiles.config_files(root) or (root / ".git" / "config",)),
    ]
    if not (root / ".git").is_dir():
        files.append(root / ".git")
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
    stamp = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            stamp.append((str(path), -1, -1))
        else:
            stamp.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(stamp)


def has_identity(query_output: str) -> bool:
    """Whether git has both a name and an email to commit with (an empty one does not
    count: git refuses to commit with an empty name)."""
    keys = set()
    for line in query_output.splitlines():
        key, _, value = line.partition(" ")
        if value.strip():
            keys.add(key)
    return keys >= {"user.name", "user.email"}


def _runtime(path: str) -> bool:
    return path == RUNTIME or path.startswith(RUNTIME + "/")


class GitService:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self._checked = False
        # The paths the last `git status` showed as known to git (changed or deleted,
        # not untracked): a commit of these needs no `git add` (see commit()).
        self._known: set[str] = set()

    def _git(self, *args: str, check: bool = True, env: Mapping[str, str] | None = None) -> str:
        """``git ARGS``' output in the repository (checked to be one the first time: by
        its ``.git``, a folder, or a file in a worktree). GitFailed on a non-zero exit
        when ``check``."""
        if not self._checked:
            if not (self.root / ".git").exists():
                raise InvalidState(f"{self.root} is not a git repository", path=str(self.root))
            self._checked = True
        return gitcmd.run(self.root, *args, check=check, env=env).out

    def head(self) -> str | None:
        """HEAD's hash, or None before the first commit: read from the repository's files
        where they say it plainly (:func:`gitfiles.read_head`), else asked of git."""
        if (self.root / ".git").exists() and (plain := gitfiles.read_head(self.root)):
            return plain
        return (
            self._git("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).strip() or None
        )

    @staticmethod
    def format_commit_message(task_id: str, title: str) -> str:
        return f"[PokéRalph] {task_id}: {title}"

    def _dirty(self, include_runtime: bool = False) -> list[str]:
        """Paths that differ from HEAD: modified, deleted, untracked (not ignored). A
        move is its two paths (``--no-renames``): a commit of the new one alone would be
        a copy, the old one's deletion left staged."""
        out = self._git("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
        paths: list[str] = []
        known: set[str] = set()
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
            if status != "??":
                known.add(path)
        self._known = known
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
        with gitcmd.start(self.root, *args) as proc:
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
        out = self._git("ls-files", "-z", "--", *paths, env=LITERAL)
        return {p for p in out.split("\0") if p} | self._in_head(paths)

    def _in_head(self, paths: list[str]) -> set[str]:
        """Which of ``paths`` HEAD holds (none before the first commit)."""
        if not self.head():
            return set()
        out = self._git("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths, env=LITERAL)
        return {p for p in out.split("\0") if p}

    def restore(self, paths: list[str]) -> list[str]:
        """Put ``paths`` back as HEAD has them: a tracked path is checked out again (a
        deleted one comes back), one git does not know is removed. The paths put back."""
        if not paths:
            return []
        in_head = self._in_head(paths)
        done: list[str] = []
        for path in paths:
            if _runtime(path):
                continue
            if path in in_head:
                self._git("checkout", "HEAD", "--", path, env=LITERAL)
                self._git("reset", "-q", "HEAD", "--", path, check=False, env=LITERAL)
            else:
                full = self.root / path
                self._git(
                    "rm", "-q", "--cached", "--ignore-unmatch", "--", path, check=False, env=LITERAL
                )
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(full)
            done.append(path)
        return done

    def _identity(self) -> Mapping[str, str]:
        """Environment for committing: the user's identity where git has one, else ours
        (a fresh machine or a CI runner has none, and git would refuse to commit).

        Asked once per repository while the config files it could come from are
        unchanged (a git process per commit was a tenth of an iteration's own cost)."""
        stamp = _identity_stamp(self.root)
        known = _identities.get(self.root)
        if known is not None and known[0] == stamp:
            return known[1]
        found = self._git(*IDENTITY_QUERY, check=False)  # exit 1: neither is set
        env = {} if has_identity(found) else FALLBACK_IDENTITY_ENV
        if len(_identities) >= 256:
            _identities.clear()
        _identities[self.root] = (stamp, env)
        return env

    def commit(self, paths: list[str], message: str, include_runtime: bool = False) -> str | None:
        """Stage exactly ``paths`` (deletions too) and commit; the new hash, or None if
        nothing changed.

        One ``git commit -- PATHS`` where every path is one the last ``git status``
        showed git knows (``commit`` takes a known path's content, or its deletion, from
        the working tree itself); a ``git add -A`` of the others first (new files, and
        any path no status was asked about). The hash is read from the branch's ref
        (:func:`~pokeralphd.gitfiles.read_head`), or asked where it cannot be read.
        Measured per iteration: 3 git processes instead of 6 (``add``, the identity's
        ``config``, ``rev-parse``)."""
        if not include_runtime:
            paths = [p for p in paths if not _runtime(p)]
        if not paths:
            return None
        unknown = [p for p in paths if p not in self._known]
        try:
            if unknown:
                self._git("add", "-A", "--", *unknown, env=LITERAL)
            self._git(
                "commit",
                "-q",
                "-m",
                message,
                "--no-verify",
                "--",
                *paths,
                env={**self._identity(), **LITERAL},
            )
        except gitcmd.GitFailed as exc:
            # Staged, and nothing differs from HEAD (before the first commit too): no
            # commit. Asked of the commit itself, not of a `diff --cached` before it.
            if exc.code == 1 and NOTHING_TO_COMMIT.search(exc.out):
                return None
            raise StorageError(
                f"git commit failed: {exc.err.strip() or exc}", paths=paths[:20]
            ) from exc
        return self.head()

    def show(self, commit: str, limit: int, timeout: float = 30.0) -> tuple[str, bool]:
        """``git show`` of ``commit`` (stat and patch, git's own diff: no external diff or
        textconv), at most ``limit`` bytes of it (read no further: a huge commit costs
        nothing), and whether it was cut."""
        args = ["show", "--no-color", "--stat", "--patch", "--format=fuller", commit, "--"]
        with gitcmd.start(self.root, *args, stderr=subprocess.PIPE) as proc:
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
        head = self.head()
        if head is None:
            raise InvalidState("the repository has no commits to revert")
        message = self._git("log", "-1", "--format=%B", head).strip()
        subject = message.splitlines()[0] if message else ""
        if expected_message_prefix and not subject.startswith(expected_message_prefix):
            raise InvalidState(
                f"HEAD ({head[:10]} “{subject[:60]}”) is not a PokéRalph commit of this task; "
                "revert it by hand with `git revert`",
                head=head,
            )
        try:
            self._git("revert", "--no-edit", head, env=self._identity())
        except gitcmd.GitFailed as exc:
            raise InvalidState(f"git revert failed: {exc.err.strip() or exc}") from exc
        new = self.head()
        assert new is not None
        return new
