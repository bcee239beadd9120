"""Issue 21, hole 4: nothing planted in a repository's ``.git`` (or its ``.gitattributes``)
runs when the daemon runs git.

An agent that can write ``.git/config``, ``.git/hooks`` and ``.gitattributes`` plants
every way we know of to make git start a program: the hooks (in ``.git/hooks`` and in a
folder ``core.hooksPath`` names), ``core.fsmonitor``, ``diff.external``, a textconv, a
clean/smudge filter (defined in a file ``include.path`` pulls in), a merge driver,
signing with a ``gpg.program``, showing signatures, a pager and editors. Each planted
program writes a marker file outside the repository and otherwise behaves (a filter
passes the content through, the "gpg" signs), so the old code ran on and showed every one
that ran. Then real battles run (one in the repository itself: commits, the reviewer's
diff, ``battle.diff``, ``battle.revert``; two in parallel worktrees: worktree add,
commits, a rebase and a fast-forward merge back), and every step of the git service and
the worktrees is called directly too; no marker may exist afterwards.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphd.battle import worktrees
from pokeralphd.battle.gitservice import GitService
from tests.helpers import DaemonProcess, make_git_repo
from tests.integration.battle_helpers import run_until, setup_repo, types
from tests.integration.test_parallel import of, setup, start_gated

END = {"battle_complete", "battle_failed", "battle_cancelled"}

HOOKS = (
    "applypatch-msg",
    "commit-msg",
    "post-applypatch",
    "post-checkout",
    "post-commit",
    "post-index-change",
    "post-merge",
    "post-rewrite",
    "pre-applypatch",
    "pre-auto-gc",
    "pre-commit",
    "pre-merge-commit",
    "pre-rebase",
    "prepare-commit-msg",
    "reference-transaction",
)

# What each planted program does besides leaving its marker: enough to let the old code
# go on (a filter or textconv passes the content through, the "gpg" makes a signature git
# accepts), so one run shows every planted program that ran.
PASS_THROUGH = "exec cat"
SIGN = (
    'case "$*" in *--verify*) exit 1;; esac\n'
    "cat >/dev/null\n"
    "echo '[GNUPG:] SIG_CREATED D 1 8 00 1 0 0' >&2\n"
    "printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nplanted\\n-----END PGP SIGNATURE-----\\n'\n"
)
PROGRAMS = {
    "fsmonitor": "exit 1",
    "diff-external": "exit 0",
    "textconv": 'exec cat "$1"',
    "filter-clean": PASS_THROUGH,
    "filter-smudge": PASS_THROUGH,
    "filter-process": "exit 1",
    "merge-driver": "exit 1",
    "gpg": SIGN,
    "pager": PASS_THROUGH,
    "editor": "exit 0",
    "sequence-editor": "exit 0",
    "askpass": "exit 1",
}


def git(repo: Path, *args: str) -> str:
    """The test's own git, unprotected on purpose: used only before anything is planted,
    or where nothing it could run matters."""
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def program(folder: Path, markers: Path, name: str, body: str) -> Path:
    """A script ``name`` in ``folder`` that leaves ``markers/name`` and then runs ``body``."""
    path = folder / name
    path.write_text(f'#!/bin/sh\necho "$*" >> "{markers / name}"\n{body}\n')
    path.chmod(0o755)
    return path


def plant(repo: Path, where: Path, *, hooks_path: bool) -> Path:
    """Plant every program in ``repo`` (scripts kept in ``where``, outside it); the folder
    their markers go to (empty now)."""
    markers = where / "markers"
    scripts = where / "planted"
    hooks = where / "hooks" if hooks_path else repo / ".git" / "hooks"
    for folder in (markers, scripts, hooks):
        folder.mkdir(parents=True, exist_ok=True)
    # the attributes and a file they apply to, committed before anything is planted
    (repo / ".gitattributes").write_text("*.txt diff=planted filter=planted merge=planted\n")
    (repo / "notes.txt").write_text("a file the attributes apply to\n")
    git(repo, "add", ".gitattributes", "notes.txt")
    git(repo, "commit", "-q", "-m", "attributes")
    for hook in HOOKS:
        program(hooks, markers, hook, "cat >/dev/null\nexit 0")
    run = {name: str(program(scripts, markers, name, body)) for name, body in PROGRAMS.items()}
    included = where / "included.gitconfig"  # pulled in by include.path, outside .git
    included.write_text(
        '[filter "planted"]\n'
        f"\tclean = {run['filter-clean']}\n"
        f"\tsmudge = {run['filter-smudge']}\n"
        "\trequired = true\n"
    )
    planted = {
        "include.path": str(included),
        "core.fsmonitor": run["fsmonitor"],
        "diff.external": run["diff-external"],
        "diff.planted.textconv": run["textconv"],
        "diff.planted.command": run["diff-external"],
        "merge.planted.driver": f"{run['merge-driver']} %O %A %B",
        "commit.gpgSign": "true",
        "gpg.program": run["gpg"],
        "log.showSignature": "true",
        "core.pager": run["pager"],
        "pager.log": run["pager"],
        "core.editor": run["editor"],
        "sequence.editor": run["sequence-editor"],
        "core.askPass": run["askpass"],
        "gc.auto": "1",
        "gc.autoDetach": "false",
    }
    if hooks_path:
        planted["core.hooksPath"] = str(hooks)
    for key, value in planted.items():
        git(repo, "config", key, value)
    # the plants work: a plain git here runs them
    assert git(repo, "config", "filter.planted.clean") == run["filter-clean"]
    return markers


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def assert_nothing_ran(markers: Path) -> None:
    found = ran(markers)
    assert found == [], "planted programs ran: " + ", ".join(found)


@pytest.mark.parametrize("hooks_path", [False, True], ids=["git-hooks", "core-hooksPath"])
def test_a_battle_in_a_planted_repository_runs_nothing_planted(
    daemon: DaemonProcess, home: Path, hooks_path: bool
) -> None:
    repo = make_git_repo(home / "repo")
    task = setup_repo(
        daemon,
        repo,
        backend="command",
        fake="fake_command",
        env={"FAKE_COMMAND_MODE": "complete"},
        phases=["implementation", "review"],
    )
    markers = plant(repo, home, hooks_path=hooks_path)

    events = run_until(daemon, ("battle.start", {"repo": str(repo), "taskId": task}), END)
    params = {"repo": str(repo), "taskId": task}
    shown = daemon.call("battle.diff", params)
    daemon.call("battle.history", params)
    daemon.call("battle.log", params)
    reverted = daemon.call("battle.revert", params)

    assert_nothing_ran(markers)
    assert types(events)[-1] == "battle_complete"
    assert "command.txt" in shown["diff"]
    assert git(repo, "log", "-2", "--format=%s").splitlines() == [
        f'Revert "[PokéRalph] {task}: Make it work"',
        f"[PokéRalph] {task}: Make it work",
    ]
    assert reverted["revertCommit"] == git(repo, "rev-parse", "HEAD")


def test_parallel_battles_in_a_planted_repository_run_nothing_planted(
    daemon: DaemonProcess, home: Path
) -> None:
    """Worktree add, commits in the worktrees, the rebase of the second onto the first's
    merge and both fast-forwards into the user's tree."""
    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["Alpha", "Beta"], gate=gate)
    markers = plant(repo, home, hooks_path=False)

    events = start_gated(daemon, repo, ids, gate)

    assert_nothing_ran(markers)
    assert {e["taskId"] for e in of(events, "battle_merged")} == set(ids)
    for task in ids:
        assert (repo / f"{task}.txt").read_text() == f"written by {task}\n"


@pytest.mark.anyio
@pytest.mark.parametrize("hooks_path", [False, True], ids=["git-hooks", "core-hooksPath"])
async def test_every_git_step_in_a_planted_repository_runs_nothing_planted(
    tmp_path: Path, hooks_path: bool
) -> None:
    """Each step of the git service and the worktrees, called directly: a conflicting
    rebase (the merge driver's moment) and a restore (a checkout) included."""
    repo = make_git_repo(tmp_path / "repo")
    markers = plant(repo, tmp_path, hooks_path=hooks_path)
    service = GitService(repo)

    def iteration() -> dict[str, Any]:
        base = service.head()
        snapshot = service.snapshot()
        (repo / "notes.txt").write_text("changed by the agent\n")
        (repo / "new.txt").write_text("new\n")
        changed = service.changed_since(snapshot)
        sha = service.commit(changed, "[PokéRalph] 001-a: A")
        (repo / "notes.txt").write_text("a verifier's stray edit\n")
        (repo / "stray.txt").write_text("stray\n")
        stat, body = service.diff(base)
        restored = service.restore(["notes.txt", "stray.txt"])
        assert sha is not None
        shown, _ = service.show(sha, 100_000)
        reverted = service.revert_last("[PokéRalph] 001-a")
        return {"stat": stat, "body": body, "restored": restored, "shown": shown, "r": reverted}

    done = await anyio.to_thread.run_sync(iteration)
    assert "new.txt" in done["stat"] and "notes.txt" in done["shown"]
    assert done["restored"] == ["notes.txt", "stray.txt"]

    root = tmp_path / "trees"
    first = await worktrees.create(repo, root, "001-a")
    (Path(first.path) / "notes.txt").write_text("the battle's notes\n")
    assert await worktrees.commit_leftovers(first, "leftovers of 001-a")
    (repo / "notes.txt").write_text("the user's notes\n")
    git(repo, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-am", "the user's notes")
    for name in ran(markers):  # the test's own commit ran the planted filter and signed
        (markers / name).unlink()
    conflict = await worktrees.merge_back(repo, first, "rebase")
    assert not conflict.merged and conflict.reason == "conflict"
    await worktrees.remove(repo, first, delete_branch=True)

    second = await worktrees.create(repo, root, "002-b")
    (Path(second.path) / "b.txt").write_text("b\n")
    assert await worktrees.commit_leftovers(second, "leftovers of 002-b")
    assert await worktrees.unmerged(repo, second)
    (repo / "c.txt").write_text("c\n")
    assert GitService(repo).commit(["c.txt"], "the user's c") is not None
    merged = await worktrees.merge_back(repo, second, "rebase")
    assert merged.merged and (repo / "b.txt").read_text() == "b\n"
    await worktrees.ensure(repo, second)
    await worktrees.sweep(repo, root, set())

    assert_nothing_ran(markers)


def test_a_submodules_own_planted_filter_does_not_run(tmp_path: Path) -> None:
    """``git status`` and ``git diff`` would run git inside a dirty submodule, under the
    submodule's own config (the agent's to write as well): they look at its commit only."""
    inner = make_git_repo(tmp_path / "inner")
    repo = make_git_repo(tmp_path / "repo")
    allow = ("-c", "protocol.file.allow=always")
    git(repo, *allow, "submodule", "add", "-q", str(inner), "sub")
    git(repo, "commit", "-q", "-m", "a submodule")
    sub = repo / "sub"
    markers = tmp_path / "markers"
    markers.mkdir()
    clean = program(tmp_path, markers, "submodule-filter", PASS_THROUGH)
    (sub / ".gitattributes").write_text("* filter=planted\n")
    git(sub, "config", "filter.planted.clean", str(clean))
    # an edit of the same size: git must read the content (through the filter) to see it
    (sub / "README.md").write_text("# SAMPLE\n")
    service = GitService(repo)

    service.snapshot()
    service.diff(service.head())

    assert_nothing_ran(markers)
