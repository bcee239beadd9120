"""What a repository's files say, read without git (:mod:`pokeralphd.gitfiles`): each
answer is git's own, or the caller is told to ask git."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pokeralphd import gitfiles
from tests.helpers import TEST_TMP, fuzz_cases, make_git_repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_head_is_read_only_where_the_files_say_it_plainly(tmp_path: Path) -> None:
    """:func:`gitfiles.read_head` gives git's own answer or None (then git is asked): a
    branch's loose or packed ref, a detached HEAD and a worktree's branch are read; an
    unborn branch, a ref to a ref and a HEAD naming a path outside ``refs/heads`` are not."""
    repo = make_git_repo(tmp_path / "r")
    head = git(repo, "rev-parse", "HEAD")
    assert gitfiles.read_head(repo) == head
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    (tmp_path / "wt" / "w.txt").write_text("w\n")
    git(tmp_path / "wt", "add", "w.txt")
    git(tmp_path / "wt", "commit", "-q", "-m", "w")
    assert gitfiles.read_head(tmp_path / "wt") == git(tmp_path / "wt", "rev-parse", "HEAD") != head
    assert gitfiles.read_head(repo) == head
    git(repo, "pack-refs", "--all")
    assert gitfiles.read_head(repo) == head  # packed: read from packed-refs
    git(repo, "checkout", "-q", "--detach")
    assert gitfiles.read_head(repo) == head
    git(repo, "checkout", "-q", "-b", "unborn-to-be")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/none-yet")
    assert gitfiles.read_head(repo) is None
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/side")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert gitfiles.read_head(repo) is None
    outside = tmp_path / "outside"
    outside.write_text(head + "\n")
    for planted in ("ref: refs/heads/../../../outside", "ref: refs/tags/x", f"{head[:20]}"):
        (repo / ".git" / "HEAD").write_text(planted + "\n")
        assert gitfiles.read_head(repo) is None
    assert gitfiles.read_head(tmp_path) is None  # no repository


def test_branches_are_read_as_git_reads_them_or_git_is_asked(tmp_path: Path) -> None:
    """:func:`gitfiles.read_branch` and :func:`gitfiles.read_head_branch` answer as git does
    (loose and packed refs, a branch that is not there) or raise AskGit (then git is
    asked): a symbolic ref, a name outside the plain ones, the reftable format."""
    repo = make_git_repo(tmp_path / "r")
    head = git(repo, "rev-parse", "HEAD")
    names = ["main-ish", "pokeralph/001-task", "a/b/c", "x", "long-x", "v1.2", "a+b@c,d=e"]
    for name in names:
        git(repo, "branch", name)
    (repo / "n.txt").write_text("n\n")
    git(repo, "add", "n.txt")
    git(repo, "commit", "-q", "-m", "n")
    git(repo, "branch", "newer")
    newer = git(repo, "rev-parse", "HEAD")
    for packed in (False, True):
        if packed:
            git(repo, "pack-refs", "--all")
            assert not (repo / ".git" / "refs" / "heads" / "x").exists()
        for name in names:
            assert gitfiles.read_branch(repo, name) == head, name
        assert gitfiles.read_branch(repo, "newer") == newer
        for absent in ("nope", "ong-x", "a/b", "pokeralph/001"):  # parts of names listed
            assert gitfiles.read_branch(repo, absent) is None, absent
    (repo / "n2.txt").write_text("n\n")
    git(repo, "add", "n2.txt")
    git(repo, "commit", "-q", "-m", "n2")  # a loose ref again, over the packed one
    branch = git(repo, "symbolic-ref", "--short", "HEAD")
    assert gitfiles.read_branch(repo, branch) == git(repo, "rev-parse", "HEAD") != head
    assert gitfiles.read_head_branch(repo) == branch

    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/x")
    for odd in ("alias", "../x", ".hidden", "x.lock", "a b", "x@{1}", "a//b", "", "/x"):
        with pytest.raises(gitfiles.AskGit):
            gitfiles.read_branch(repo, odd)
    git(repo, "checkout", "-q", "--detach")
    assert gitfiles.read_head_branch(repo) is None
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    with pytest.raises(gitfiles.AskGit):  # HEAD names a symbolic ref: git knows where it ends
        gitfiles.read_branch(repo, gitfiles.read_head_branch(repo) or "")
    (repo / ".git" / "HEAD").write_text("ref: refs/tags/v1\n")
    with pytest.raises(gitfiles.AskGit):
        gitfiles.read_head_branch(repo)
    with pytest.raises(gitfiles.AskGit):
        gitfiles.read_branch(tmp_path, "x")  # no repository


def test_a_reftable_repository_is_always_asked_of_git(tmp_path: Path) -> None:
    """Its refs are in ``reftable/``, not in files: read as files, every branch would
    seem absent. (Where this git cannot make one, its folder is made by hand.)"""
    repo = tmp_path / "r"
    done = subprocess.run(
        ["git", "init", "-q", "--ref-format=reftable", str(repo)], capture_output=True
    )
    if done.returncode != 0:
        repo = make_git_repo(repo)
        (repo / ".git" / "reftable").mkdir()
    with pytest.raises(gitfiles.AskGit):
        gitfiles.read_branch(repo, "main")


_NAME_PART = st.text(alphabet="abcXYZ019_+=@,-.", min_size=1, max_size=8)


@settings(max_examples=fuzz_cases(25, 300), deadline=None)
@given(
    names=st.lists(
        st.lists(_NAME_PART, min_size=1, max_size=3).map("/".join),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    packed=st.booleans(),
    asked=st.lists(_NAME_PART, max_size=3),
)
def test_a_branch_read_from_the_files_is_what_git_says_or_git_is_asked(
    names: list[str], packed: bool, asked: list[str]
) -> None:
    """Any names git accepts (and some it refuses), loose or packed, and names that are
    not branches: ``read_branch`` gives ``git rev-parse``'s answer, or asks git."""
    with tempfile.TemporaryDirectory(dir=TEST_TMP) as tmp:
        repo = make_git_repo(Path(tmp) / "r")
        made = []
        for name in names:
            done = subprocess.run(["git", "-C", str(repo), "branch", name], capture_output=True)
            if done.returncode == 0:
                made.append(name)
        if packed:
            git(repo, "pack-refs", "--all")
        for name in [*made, *asked, *(n + "x" for n in made)]:
            try:
                read = gitfiles.read_branch(repo, name)
            except gitfiles.AskGit:
                continue
            said = subprocess.run(
                ["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"refs/heads/{name}"],
                capture_output=True,
                text=True,
            )
            expected = said.stdout.strip() if said.returncode == 0 else None
            assert read == expected, (name, made, packed)
