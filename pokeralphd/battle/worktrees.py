"""Parallel battles' git worktrees (issue 14): create, recover, merge back, remove.

A battle that runs beside others in one repository gets a worktree of its own under the
daemon's state folder (``{stateDir}/worktrees/{repo}-{hash}/{taskId}``, never inside the
user's working tree) on a branch ``pokeralph/{taskId}`` made from the HEAD the user had
checked out. When the battle completes its branch is merged back into that branch:

- ``ff``: only when the branch did not move meanwhile (a fast-forward);
- ``rebase`` (default): when it moved, the battle's commits are first rebased onto it in
  the battle's worktree, then fast-forwarded.

The user's working tree is touched only by ``git merge --ff-only`` run in it, which
refuses (and changes nothing) when uncommitted changes or untracked files would be
overwritten; when the branch is checked out nowhere, the ref moves with a
compare-and-swap ``git update-ref``. A rebase conflict is aborted: the battle's branch is
left exactly as it was and the conflicting files are named for a person.

Every git command runs through :mod:`pokeralphd.gitcmd` (hooks, the fsmonitor, the
repository's filters and drivers off: a worktree add, a rebase and a merge would run
them) as a child with a timeout; callers serialise merges of one repository.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pokeralphd import gitcmd, gitfiles
from pokeralphd.battle.gitservice import FALLBACK_IDENTITY_ENV, IDENTITY_QUERY, has_identity
from pokeralphd.domain.models import BattleWorktree
from pokeralphd.errors import InvalidState
from pokeralphd.gitcmd import GitFailed as GitFailed  # raised by every function here

if TYPE_CHECKING:
    from collections.abc import Mapping

BRANCH_PREFIX = "pokeralph/"
GIT_TIMEOUT = 120.0  # seconds for one git command (a rebase of many commits included)
MAX_FILES = 50  # conflicting files named in a message


@dataclass
class MergeOutcome:
    """What merging a battle's branch back did: ``merged`` with the tip that landed, or
    why not (``reason``: conflict, diverged, dirty, refused, moved, missing), said in
    ``message`` with the next step where there is one of its own, and the files."""

    merged: bool
    tip: str | None = None
    reason: str | None = None
    message: str = ""
    files: list[str] = field(default_factory=list)


def branch_for(task_id: str) -> str:
    return BRANCH_PREFIX + task_id


def folder_for(root: Path, repo_path: Path) -> Path:
    """The folder holding one repository's worktrees (its name plus a hash of its path,
    so two repositories of one name never share it)."""
    digest = hashlib.sha256(str(repo_path.resolve()).encode()).hexdigest()[:10]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in repo_path.name)[:40]
    return root / f"{name or 'repo'}-{digest}"


async def git(
    cwd: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None
) -> str:
    """Run ``git args`` in ``cwd`` (protected, at most :data:`GIT_TIMEOUT` seconds); its
    stdout (stripped). GitFailed on a non-zero exit when ``check``."""
    done = await gitcmd.run_async(cwd, *args, check=check, env=env, timeout=GIT_TIMEOUT)
    return done.out.strip()


async def _ok(cwd: Path, *args: str) -> bool:
    try:
        await git(cwd, *args)
    except GitFailed:
        return False
    return True


async def current_branch(repo_path: Path) -> str | None:
    """The branch checked out in ``repo_path`` (None: a detached HEAD): from its files
    where they say it plainly, else asked of git."""
    try:
        return await anyio.to_thread.run_sync(gitfiles.read_head_branch, repo_path)
    except gitfiles.AskGit:
        pass
    try:
        ref = await git(repo_path, "symbolic-ref", "-q", "HEAD")
    except GitFailed:
        return None
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None


async def rev(repo_path: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None. A branch (``refs/heads/NAME``) is read from the
    repository's files where they say it plainly (:func:`gitfiles.read_branch`: a battle's
    end read five refs, each a git process), and so is HEAD's commit
    (:func:`gitfiles.read_head`); anything else is asked of git."""
    if ref.startswith("refs/heads/"):
        try:
            return await anyio.to_thread.run_sync(
                gitfiles.read_branch, repo_path, ref.removeprefix("refs/heads/")
            )
        except gitfiles.AskGit:
            pass
    elif ref == "HEAD" and (plain := await anyio.to_thread.run_sync(gitfiles.read_head, repo_path)):
        return plain
    try:
        return await git(repo_path, "rev-parse", "--verify", "-q", ref + "^{commit}")
    except GitFailed:
        return None


async def _identity(cwd: Path) -> Mapping[str, str]:
    """Environment giving git an identity for the commits we write here (a rebase's, the
    leftovers'), when the user has none: the same rule as the git service's."""
    found = await git(cwd, *IDENTITY_QUERY, check=False)
    return {} if has_identity(found) else FALLBACK_IDENTITY_ENV


async def create(repo_path: Path, root: Path, task_id: str) -> BattleWorktree:
    """A new worktree for ``task_id`` on ``pokeralph/{taskId}`` from the checked-out HEAD.

    Refused (InvalidState, nothing made) on a detached HEAD or an unborn branch. When
    the branch is left from an earlier attempt with commits not on the current branch (a
    failed battle's work), the new worktree continues from them: nothing is dropped.
    """
    base = await current_branch(repo_path)
    if base is None:
        raise InvalidState(
            f"{repo_path} has a detached HEAD: check out a branch for parallel battles to "
            "merge back into",
            path=str(repo_path),
        )
    head = await rev(repo_path, "HEAD")
    if head is None:
        raise InvalidState(f"{repo_path} has no commit yet: commit once first", path=str(repo_path))
    branch = branch_for(task_id)
    path = folder_for(root, repo_path) / task_id
    await _drop_worktree(repo_path, path)
    await anyio.to_thread.run_sync(lambda: path.parent.mkdir(parents=True, exist_ok=True))
    existing = await rev(repo_path, f"refs/heads/{branch}")
    if existing is not None and await _ok(repo_path, "merge-base", "--is-ancestor", existing, head):
        await git(repo_path, "branch", "-D", branch)  # merged already: start afresh
        existing = None
    if existing is None:
        await git(repo_path, "worktree", "add", "-b", branch, str(path), head)
    else:
        await git(repo_path, "worktree", "add", str(path), branch)
    return BattleWorktree(path=str(path), branch=branch, base_branch=base)


def _rebasing(cwd: Path) -> bool:
    """A rebase is under way in the worktree ``cwd`` (its ``.git`` file names its git
    folder, where git keeps a rebase's state)."""
    try:
        text = (cwd / ".git").read_text()
    except OSError:
        return False
    if not text.startswith("gitdir: "):
        return False
    gitdir = Path(text[len("gitdir: ") :].strip())
    return (gitdir / "rebase-merge").exists() or (gitdir / "rebase-apply").exists()


async def commit_leftovers(worktree: BattleWorktree, message: str) -> str | None:
    """Commit what the battle's agents left uncommitted in its worktree (an iteration cut
    short by a restart, say): in a tree only the battle writes, that is all the battle's,
    and removing the worktree must not lose it. The new commit, or None."""
    cwd = Path(worktree.path)
    if not await anyio.to_thread.run_sync(lambda: (cwd / ".git").exists()):
        return None
    if await anyio.to_thread.run_sync(_rebasing, cwd):  # a merge a crash left halfway
        await git(cwd, "rebase", "--abort", check=False)
    scope = ("--", ".", ":(exclude).pokeralph")
    if not await git(cwd, "status", "--porcelain", "--untracked-files=all", *scope):
        return None
    await git(cwd, "add", "-A", *scope)
    ident = await _identity(cwd)
    await git(cwd, "commit", "-q", "--no-verify", "-m", message, env=ident)
    return await rev(cwd, "HEAD")


async def unmerged(repo_path: Path, worktree: BattleWorktree) -> bool:
    """The battle's branch holds commits its base branch does not have."""
    tip = await rev(repo_path, f"refs/heads/{worktree.branch}")
    if tip is None:
        return False
    base = await rev(repo_path, f"refs/heads/{worktree.base_branch}")
    if base is None:
        return True
    return not await _ok(repo_path, "merge-base", "--is-ancestor", tip, base)


async def ensure(repo_path: Path, worktree: BattleWorktree) -> None:
    """After a restart: the worktree is there, or made again from its branch."""
    path = Path(worktree.path)
    if await anyio.to_thread.run_sync(lambda: (path / ".git").exists()):
        return
    await git(repo_path, "worktree", "prune")
    if await rev(repo_path, f"refs/heads/{worktree.branch}") is None:
        raise InvalidState(f"the battle's branch {worktree.branch} is gone", branch=worktree.branch)
    await _drop_worktree(repo_path, path)
    await anyio.to_thread.run_sync(lambda: path.parent.mkdir(parents=True, exist_ok=True))
    await git(repo_path, "worktree", "add", str(path), worktree.branch)


async def _drop_worktree(repo_path: Path, path: Path) -> None:
    """No worktree at ``path`` any more, nor git's record of one. ``worktree remove``
    takes both; where it cannot (or there was no folder: a worktree made anew, whose
    folder a crash or a person may have taken), the folder goes and git forgets what it
    no longer finds (``worktree prune``)."""
    if await anyio.to_thread.run_sync(path.exists) and await _ok(
        repo_path, "worktree", "remove", "--force", "--force", str(path)
    ):
        return
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
    await git(repo_path, "worktree", "prune")


async def remove(repo_path: Path, worktree: BattleWorktree, *, delete_branch: bool) -> None:
    """Remove the battle's worktree (its folder and git's record of it) and, when asked,
    its branch. Idempotent."""
    await _drop_worktree(repo_path, Path(worktree.path))
    if delete_branch and await rev(repo_path, f"refs/heads/{worktree.branch}") is not None:
        await git(repo_path, "branch", "-D", worktree.branch)


async def sweep(repo_path: Path, root: Path, keep: set[str]) -> list[str]:
    """Remove worktrees in this repository's folder that no battle owns (one the previous
    daemon was making or removing when it stopped), and their branches when merged; the
    task ids removed. A branch with commits of its own is kept: nothing is dropped."""
    folder = folder_for(root, repo_path)
    if not await anyio.to_thread.run_sync(folder.is_dir):
        return []
    names = await anyio.to_thread.run_sync(lambda: sorted(p.name for p in folder.iterdir()))
    removed = []
    head = await rev(repo_path, "HEAD")
    for name in names:
        if name not in keep:
            await _drop_worktree(repo_path, folder / name)
            removed.append(name)
            # its branch too, when it holds nothing the checked-out branch lacks
            tip = await rev(repo_path, f"refs/heads/{branch_for(name)}")
            if (
                tip is not None
                and head is not None
                and await _ok(repo_path, "merge-base", "--is-ancestor", tip, head)
            ):
                await git(repo_path, "branch", "-D", branch_for(name))
    return removed


async def _checked_out_at(repo_path: Path, branch: str) -> Path | None:
    """The working tree that has ``branch`` checked out, if any."""
    listing = await git(repo_path, "worktree", "list", "--porcelain")
    where: Path | None = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            where = Path(line[len("worktree ") :])
        elif line == f"branch refs/heads/{branch}" and where is not None:
            return where
    return None


def _files_in(text: str) -> list[str]:
    """The tab-indented paths git lists after 'would be overwritten' and similar."""
    return [line.strip() for line in text.splitlines() if line.startswith("\t")][:MAX_FILES]


async def _changed(cwd: Path, base: str, tip: str) -> set[str]:
    out = await git(cwd, "diff", "--name-only", base, tip)
    return {line for line in out.splitlines() if line}


async def merge_back(repo_path: Path, worktree: BattleWorktree, strategy: str) -> MergeOutcome:
    """Merge the battle's branch into its base branch (see the module's docstring)."""
    branch, base = worktree.branch, worktree.base_branch
    cwd = Path(worktree.path)
    for _ in range(3):  # the user may commit in between: try again from the top
        tip = await rev(repo_path, f"refs/heads/{branch}")
        target = await rev(repo_path, f"refs/heads/{base}")
        if tip is None:
            return MergeOutcome(False, reason="missing", message=f"the branch {branch} is gone")
        if target is None:
            return MergeOutcome(
                False,
                reason="missing",
                message=f"the branch {base} the battle started from is gone; "
                f"the work is on {branch}",
            )
        if tip == target or await _ok(repo_path, "merge-base", "--is-ancestor", tip, target):
            return MergeOutcome(True, tip=target)  # nothing of ours is missing there
        if not await _ok(repo_path, "merge-base", "--is-ancestor", target, tip):
            fork = await git(repo_path, "merge-base", target, tip)
            both = sorted(
                (await _changed(repo_path, fork, target)) & (await _changed(repo_path, fork, tip))
            )
            if strategy == "ff":
                return MergeOutcome(
                    False,
                    reason="diverged",
                    message=f"{base} moved since the battle started and mergeStrategy is ff: "
                    f"no fast-forward of {branch} is possible"
                    + (f" (both changed {', '.join(both[:MAX_FILES])})" if both else "")
                    + "; to have it rebased, `pokeralphctl config set mergeStrategy rebase` "
                    "and answer retry",
                    files=both[:MAX_FILES],
                )
            ident = await _identity(repo_path)
            try:
                await git(cwd, "rebase", target, env=ident)
            except GitFailed as failed:
                conflicted = await git(cwd, "diff", "--name-only", "--diff-filter=U", check=False)
                files = [f for f in conflicted.splitlines() if f][:MAX_FILES] or both[:MAX_FILES]
                await git(cwd, "rebase", "--abort", check=False)
                return MergeOutcome(
                    False,
                    reason="conflict",
                    message=f"rebasing {branch} onto {base} conflicts"
                    + (f" in {', '.join(files)}" if files else f": {failed.err.strip()[:300]}"),
                    files=files,
                )
            continue  # rebased: now a fast-forward
        where = await _checked_out_at(repo_path, base)
        if where is None:
            if await _ok(repo_path, "update-ref", f"refs/heads/{base}", tip, target):
                return MergeOutcome(True, tip=tip)
            continue
        try:
            await git(where, "merge", "--ff-only", "--no-edit", tip)
        except GitFailed as failed:
            text = failed.err + failed.out
            files = _files_in(text)
            if "would be overwritten" in text or "untracked working tree files" in text:
                return MergeOutcome(
                    False,
                    reason="dirty",
                    message=f"merging {branch} into {base} would overwrite your uncommitted "
                    f"changes in {where}"
                    + (f" ({', '.join(files)})" if files else "")
                    + ": commit or stash them, then answer retry",
                    files=files,
                )
            if await rev(repo_path, f"refs/heads/{base}") != target:
                continue  # the branch moved under us: from the top
            return MergeOutcome(
                False,
                reason="refused",
                message=f"git refused to fast-forward {base} in {where}: {text.strip()[:300]}",
            )
        return MergeOutcome(True, tip=tip)
    return MergeOutcome(
        False, reason="moved", message=f"{base} kept moving while merging {branch}; try again"
    )
