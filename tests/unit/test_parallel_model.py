"""Issue 14's model and git side: frozen files with a worktree and dependsOn load and round
trip (schema 2, optional fields), dependsOn is validated (unknown, itself, cycles named),
and merging a worktree's branch back with real git: fast-forward, rebase, ff refused on a
diverged branch, a branch checked out nowhere moved by compare-and-swap."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pokeralph_core import documents
from pokeralph_core.config.model import Config
from pokeralphd.battle import worktrees
from pokeralphd.domain.models import PRD, Task
from pokeralphd.store.filemanager import HISTORY_KIND, PRD_KIND
from tests.helpers import make_git_repo

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parallel"


@pytest.mark.parametrize(("name", "kind"), [("history.json", HISTORY_KIND), ("prd.json", PRD_KIND)])
def test_the_frozen_parallel_files_load_and_round_trip(
    name: str, kind: Any, tmp_path: Path
) -> None:
    raw = json.loads((FIXTURES / name).read_text())
    copy = tmp_path / name
    shutil.copy(FIXTURES / name, copy)
    loaded = documents.load(kind, copy)
    assert loaded is not None and loaded.version == raw["version"]
    body = json.loads(documents.encode_document(kind, loaded.value, loaded.version))
    assert body == raw


def test_the_frozen_history_keeps_its_worktree_and_the_prd_its_dependencies() -> None:
    history = documents.load(HISTORY_KIND, FIXTURES / "history.json")
    assert history is not None and history.value.worktree is not None
    assert history.value.worktree.branch == "pokeralph/001-make-it-work"
    assert history.value.worktree.base_branch == "main" and not history.value.worktree.merged
    prd = documents.load(PRD_KIND, FIXTURES / "prd.json")
    assert prd is not None
    assert prd.value.tasks[1].depends_on == ["001-make-it-work"]


def _task(n: int, deps: list[int]) -> Task:
    return Task(
        id=f"{n:03d}-t",
        title="t",
        description="d",
        acceptance_criteria=["c"],
        depends_on=[f"{d:03d}-t" for d in deps],
    )


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ({1: [1]}, "001-t depends on itself"),
        ({1: [7]}, "001-t depends on unknown task(s) 007-t"),
        ({1: [3], 2: [1], 3: [2]}, "cycle: 001-t -> 003-t -> 002-t -> 001-t"),
    ],
)
def test_depends_on_is_validated(graph: dict[int, list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PRD(name="p", description="d", tasks=[_task(n, d) for n, d in graph.items()])


def test_a_long_chain_of_dependencies_is_fine() -> None:
    tasks = [_task(n, [n + 1] if n < 2500 else []) for n in range(1, 2501)]
    assert len(PRD(name="p", description="d", tasks=tasks).tasks) == 2500


def test_parallel_config_is_bounded() -> None:
    assert Config().parallel_battles == 1 and Config().merge_strategy == "rebase"
    for bad in (0, 17):
        with pytest.raises(ValueError, match="parallel"):
            Config.model_validate({"parallelBattles": bad})
    with pytest.raises(ValueError, match="mergeStrategy"):
        Config.model_validate({"mergeStrategy": "octopus"})


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(where: Path, name: str, text: str) -> None:
    (where / name).write_text(text)
    git(where, "add", name)
    git(where, "commit", "-q", "-m", f"write {name}")


async def test_merge_back_fast_forwards_rebases_and_refuses_ff_when_diverged(
    tmp_path: Path,
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    root = tmp_path / "trees"
    tree = await worktrees.create(repo, root, "001-a")
    assert tree.base_branch == "main" and Path(tree.path).parent.parent == root
    commit(Path(tree.path), "a.txt", "a\n")
    outcome = await worktrees.merge_back(repo, tree, "ff")
    assert outcome.merged and git(repo, "rev-parse", "main") == outcome.tip
    assert (repo / "a.txt").read_text() == "a\n"
    await worktrees.remove(repo, tree, delete_branch=True)
    assert not Path(tree.path).exists() and not git(repo, "branch", "--list", "pokeralph/*")

    tree = await worktrees.create(repo, root, "002-b")
    commit(Path(tree.path), "b.txt", "b\n")
    commit(repo, "user.txt", "the user's commit\n")  # main moved meanwhile
    refused = await worktrees.merge_back(repo, tree, "ff")
    assert not refused.merged and refused.reason == "diverged"
    assert "pokeralphctl config set mergeStrategy rebase" in refused.message
    rebased = await worktrees.merge_back(repo, tree, "rebase")
    assert rebased.merged
    assert git(repo, "log", "--format=%s", "-2").splitlines() == [
        "write b.txt",
        "write user.txt",
    ]


async def test_a_base_branch_checked_out_nowhere_moves_by_compare_and_swap(
    tmp_path: Path,
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    tree = await worktrees.create(repo, tmp_path / "trees", "001-a")
    commit(Path(tree.path), "a.txt", "a\n")
    git(repo, "checkout", "-q", "-b", "elsewhere")  # the user moved to another branch
    (repo / "draft.txt").write_text("untouched\n")
    outcome = await worktrees.merge_back(repo, tree, "rebase")
    assert outcome.merged and git(repo, "rev-parse", "main") == outcome.tip
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "elsewhere"
    assert not (repo / "a.txt").exists() and (repo / "draft.txt").read_text() == "untouched\n"


async def test_a_failed_attempts_branch_is_continued_not_dropped(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    root = tmp_path / "trees"
    tree = await worktrees.create(repo, root, "001-a")
    commit(Path(tree.path), "half.txt", "half done\n")
    await worktrees.remove(repo, tree, delete_branch=False)
    again = await worktrees.create(repo, root, "001-a")
    assert (Path(again.path) / "half.txt").read_text() == "half done\n"
    assert await worktrees.unmerged(repo, again)


async def test_sweep_removes_worktrees_no_battle_owns(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    root = tmp_path / "trees"
    kept = await worktrees.create(repo, root, "001-a")
    stray = await worktrees.create(repo, root, "002-b")
    assert await worktrees.sweep(repo, root, {"001-a"}) == ["002-b"]
    assert Path(kept.path).exists() and not Path(stray.path).exists()
    assert str(stray.path) not in git(repo, "worktree", "list")
    assert git(repo, "branch", "--list", "pokeralph/*", "--format=%(refname:short)") == (
        "pokeralph/001-a"
    )


async def test_a_rebase_left_halfway_is_aborted_before_leftovers_are_committed(
    tmp_path: Path,
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    tree = await worktrees.create(repo, tmp_path / "trees", "001-a")
    where = Path(tree.path)
    commit(where, "same.txt", "ours\n")
    commit(repo, "same.txt", "theirs\n")
    before = git(where, "rev-parse", "HEAD")
    failed = subprocess.run(["git", "-C", str(where), "rebase", "main"], capture_output=True)
    assert failed.returncode != 0 and worktrees._rebasing(where)  # as a crash would leave it
    assert await worktrees.commit_leftovers(tree, "leftovers") is None
    assert not worktrees._rebasing(where) and git(where, "rev-parse", "HEAD") == before
    assert (where / "same.txt").read_text() == "ours\n"


async def test_worktree_commits_and_iteration_commits_take_the_same_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an email but no name configured, the git service commits as pokeralph; so do
    the commits written in a worktree (they once asked only for an email)."""
    from pokeralphd.battle.gitservice import GitService

    repo = make_git_repo(tmp_path / "repo")  # (made under the machine's own identity)
    only_email = tmp_path / "gitconfig"
    only_email.write_text("[user]\n\temail = someone@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(only_email))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    for key in ("user.name", "user.email"):  # the test repository's own, if it has them
        subprocess.run(["git", "-C", str(repo), "config", "--unset-all", key], check=False)
    (repo / "a.txt").write_text("a\n")
    assert GitService(repo).commit(["a.txt"], "[PokéRalph] 001-a: A")
    tree = await worktrees.create(repo, tmp_path / "trees", "001-a")
    (Path(tree.path) / "b.txt").write_text("b\n")
    assert await worktrees.commit_leftovers(tree, "leftovers")
    authors = {
        git(repo, "log", "-1", "--format=%an <%ae>"),
        git(Path(tree.path), "log", "-1", "--format=%an <%ae>"),
    }
    assert authors == {"pokeralph <pokeralph@localhost>"}
