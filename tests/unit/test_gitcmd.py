"""The one place the daemon runs git (:mod:`pokeralphd.gitcmd`): its exact protections,
that they reach a real git over a repository's own config, which drivers it neutralises
(the repository's, not the user's), and when the listing behind them is used again."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pokeralphd import childproc, gitcmd
from tests.helpers import make_git_repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_exact_protections() -> None:
    assert gitcmd.PROTECTIONS == (
        ("core.hooksPath", "/dev/null"),
        ("core.fsmonitor", "false"),
        ("commit.gpgSign", "false"),
        ("tag.gpgSign", "false"),
        ("log.showSignature", "false"),
        ("merge.verifySignatures", "false"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("submodule.recurse", "false"),
        ("credential.helper", ""),
        ("core.askPass", ""),
    )
    assert gitcmd.ENVIRONMENT == {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ALLOW_PROTOCOL": "",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": ":",
        "GIT_SEQUENCE_EDITOR": ":",
        "LC_ALL": "C",
    }
    git_ = gitcmd.git_executable()
    assert gitcmd.argv(["diff", "--stat", "HEAD"]) == [
        git_,
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=dirty",
        "--stat",
        "HEAD",
    ]
    assert gitcmd.argv(["show", "X"]) == [git_, "show", "--no-ext-diff", "--no-textconv", "X"]
    assert gitcmd.argv(["log", "-1"]) == [git_, "log", "--no-ext-diff", "--no-textconv", "-1"]
    assert gitcmd.argv(["status"]) == [git_, "status", "--ignore-submodules=dirty"]
    assert gitcmd.argv(["merge", "--ff-only"]) == [git_, "merge", "--no-stat", "--ff-only"]
    assert gitcmd.argv(["commit", "-m", "x"]) == [git_, "commit", "-m", "x"]
    with pytest.raises(ValueError, match="subcommand"):
        gitcmd.argv(["-c", "core.hooksPath=x", "commit"])  # config goes in the environment


def test_the_environment_puts_ours_last_and_drops_what_would_outrank_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "Ada")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/elsewhere'")
    for name in ("GIT_EXTERNAL_DIFF", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.setenv(name, "/planted")
    env = gitcmd.environment((("filter.x.clean", ""),), {"GIT_AUTHOR_NAME": "pokeralph"})
    pairs = [
        (env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"])
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    ]
    assert pairs == [("user.name", "Ada"), *gitcmd.PROTECTIONS, ("filter.x.clean", "")]
    assert not set(gitcmd.UNSET) & set(env)
    assert env["GIT_AUTHOR_NAME"] == "pokeralph" and env["GIT_ALLOW_PROTOCOL"] == ""


def test_the_protections_outrank_the_repositorys_config(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    for key, value in (
        ("core.hooksPath", str(tmp_path / "hooks")),
        ("core.fsmonitor", str(tmp_path / "monitor")),
        ("commit.gpgSign", "true"),
        ("filter.x.clean", "planted"),
        ("protocol.allow", "always"),
    ):
        git(repo, "config", key, value)

    def seen(key: str) -> str:
        return gitcmd.run(repo, "config", "--get", key, check=False).out.strip()

    assert seen("core.hooksPath") == "/dev/null"
    assert seen("core.fsmonitor") == "false"
    assert seen("commit.gpgSign") == "false"
    assert seen("filter.x.clean") == ""
    assert seen("filter.x.required") == "false"
    # no transport at all, whatever the repository allows
    failed = gitcmd.run(repo, "ls-remote", str(repo), check=False)
    assert failed.code != 0 and "transport 'file' not allowed" in failed.err


def test_only_the_repositorys_own_drivers_are_neutralised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter the user installed globally (git-lfs, say) keeps working; one the
    repository's config (or a file it includes) defines does not; subsection names keep
    their case and may hold dots and ``=``."""
    user = tmp_path / "gitconfig"
    user.write_text('[filter "lfs"]\n\tclean = git-lfs clean -- %f\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    repo = make_git_repo(tmp_path / "repo")
    included = tmp_path / "included"
    included.write_text('[merge "Mine.v2"]\n\tdriver = planted %A\n')
    git(repo, "config", "include.path", str(included))
    git(repo, "config", "diff.a=b.textconv", "planted")
    git(repo, "config", "merge.ff", "false")  # no subsection: no driver
    overrides = gitcmd.repository_overrides(repo)
    assert overrides == (
        ("diff.a=b.command", ""),
        ("diff.a=b.textconv", ""),
        ("merge.Mine.v2.driver", "false"),
    )
    listed = gitcmd.run(repo, "config", "--get-regexp", r"^(filter|merge|diff)\.").out
    assert "filter.lfs.clean git-lfs clean -- %f" in listed.splitlines()
    assert "merge.Mine.v2.driver false" in listed.splitlines()


def test_the_listing_is_used_again_until_the_config_changes(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    cache = gitcmd._OverrideCache()
    assert cache.get(repo) == () and cache.listings == 1
    assert cache.get(repo) == () and cache.listings == 1  # two stats, no git
    git(repo, "config", "filter.x.smudge", "planted")
    assert ("filter.x.smudge", "") in cache.get(repo) and cache.listings == 2
    assert cache.get(repo) and cache.listings == 2

    # a linked worktree reads the shared config, whose bytes were listed: no git
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree))
    assert ("filter.x.smudge", "") in cache.get(tree) and cache.listings == 2
    cache.get(tree)
    assert cache.listings == 2
    git(repo, "config", "filter.y.clean", "planted")  # seen from the worktree as well
    assert ("filter.y.clean", "") in cache.get(tree) and cache.listings == 3
    assert ("filter.y.clean", "") in cache.get(repo) and cache.listings == 3

    # config.worktree appearing (with the extension on) counts as a change
    git(repo, "config", "extensions.worktreeConfig", "true")
    cache.get(repo)
    listed = cache.listings
    (repo / ".git" / "config.worktree").write_text('[filter "w"]\n\tclean = planted\n')
    assert ("filter.w.clean", "") in cache.get(repo) and cache.listings == listed + 1


def test_a_config_rewritten_as_it_was_is_not_listed_again(tmp_path: Path) -> None:
    """``git branch -D`` rewrites the config for every branch it deletes: a new inode,
    the same bytes. A hundred battles ending together each listed it three times."""
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "config", "filter.x.smudge", "planted")
    cache = gitcmd._OverrideCache()
    assert ("filter.x.smudge", "") in cache.get(repo) and cache.listings == 1
    config = repo / ".git" / "config"
    before = (config.stat().st_ino, config.read_bytes())
    git(repo, "branch", "gone")
    git(repo, "branch", "-D", "gone")
    assert (config.stat().st_ino, config.read_bytes()) != before  # rewritten...
    assert config.read_bytes() == before[1]  # ...as it was
    assert ("filter.x.smudge", "") in cache.get(repo) and cache.listings == 1
    config.write_bytes(before[1].replace(b"planted", b"changed"))  # the same size
    assert ("filter.x.smudge", "") in cache.get(repo) and cache.listings == 2
    config.write_bytes(before[1].replace(b'"x"', b'"z"'))
    assert ("filter.z.smudge", "") in cache.get(repo) and cache.listings == 3


def test_a_config_that_changes_while_it_is_listed_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing may have read either version: it is used once and not remembered for
    the bytes read before it (else a version listed without its driver could stand for
    one that has it)."""
    repo = make_git_repo(tmp_path / "repo")
    config = repo / ".git" / "config"
    original = config.read_bytes()
    planted = original + b'[filter "x"]\n\tclean = planted\n'
    listing = gitcmd._list_config

    def listed_as_it_changes(cwd: Path) -> str:
        config.write_bytes(planted)
        text = listing(cwd)
        config.write_bytes(original)  # back as it was read before: a new ctime
        return text

    cache = gitcmd._OverrideCache()
    monkeypatch.setattr(gitcmd, "_list_config", listed_as_it_changes)
    assert ("filter.x.clean", "") in cache.get(repo) and cache.listings == 1
    monkeypatch.setattr(gitcmd, "_list_config", listing)
    assert cache.get(repo) == () and cache.listings == 2  # not what the first listing saw


def test_a_config_too_big_to_keep_is_listed_every_time(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    with (repo / ".git" / "config").open("a") as f:
        f.write("# " + "x" * gitcmd.MAX_KEPT_CONFIG + "\n")
    cache = gitcmd._OverrideCache()
    assert cache.get(repo) == () and cache.get(repo) == ()
    assert cache.listings == 2


def test_a_config_that_includes_another_is_listed_every_time(tmp_path: Path) -> None:
    """An included file could be written without the repository's config changing: a
    listing with an include is never reused, so what appears there is seen at once."""
    repo = make_git_repo(tmp_path / "repo")
    later = tmp_path / "later.gitconfig"  # named before it exists
    git(repo, "config", "include.path", str(later))
    cache = gitcmd._OverrideCache()
    assert cache.get(repo) == ()
    later.write_text('[filter "late"]\n\tprocess = planted\n')
    assert ("filter.late.process", "") in cache.get(repo)
    assert cache.listings == 2


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    cache = gitcmd._OverrideCache(capacity=2)
    repos = [make_git_repo(tmp_path / f"r{i}") for i in range(3)]
    for repo in repos:
        cache.get(repo)
    assert list(cache._entries) == [str(repos[1]), str(repos[2])]


def test_a_config_git_cannot_read_stops_the_command(tmp_path: Path) -> None:
    """Fail closed: with a config it cannot read, nothing runs (git would refuse too)."""
    repo = make_git_repo(tmp_path / "repo")
    with (repo / ".git" / "config").open("a") as f:
        f.write("[broken\n")
    with pytest.raises(gitcmd.GitFailed, match="config"):
        gitcmd.run(repo, "status")


def test_the_identity_of_the_users_config_still_commits(tmp_path: Path) -> None:
    """The protections leave the user's name and email alone."""
    repo = make_git_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    gitcmd.run(repo, "add", "a.txt")
    gitcmd.run(repo, "commit", "-q", "-m", "a")
    expected = subprocess.run(
        ["git", "-C", str(repo), "config", "user.email"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    ).stdout.strip()
    assert git(repo, "log", "-1", "--format=%ae") == expected


@pytest.mark.anyio
@pytest.mark.parametrize("from_descriptors", [True, False])
async def test_an_async_git_gives_its_output_and_errors_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_descriptors: bool
) -> None:
    """:func:`gitcmd.run_async`, driven from the child's descriptors (Linux) or asyncio's
    way: output past a pipe's buffer on both streams, the exit status, the error."""
    if from_descriptors and not childproc.usable():
        pytest.skip("no pidfds here")
    if not from_descriptors:
        monkeypatch.setattr(childproc, "usable", lambda: False)
    repo = make_git_repo(tmp_path / "repo")
    big = "".join(f"line {i}\n" for i in range(40_000))  # ~400 KB
    (repo / "big.txt").write_text(big)
    git(repo, "add", "big.txt")
    git(repo, "commit", "-q", "-m", "big")
    done = await gitcmd.run_async(repo, "show", "HEAD:big.txt")
    assert (done.code, done.out) == (0, big)
    with pytest.raises(gitcmd.GitFailed) as failed:
        await gitcmd.run_async(repo, "show", "HEAD:missing.txt")
    assert "missing.txt" in failed.value.err and failed.value.code == 128
    quiet = await gitcmd.run_async(repo, "rev-parse", "--verify", "-q", "nope", check=False)
    assert (quiet.code, quiet.out, quiet.err) == (1, "", "")


@pytest.mark.anyio
async def test_an_async_git_runs_in_the_daemons_session_and_ends_on_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a session (so not an autogroup) of its own: the scheduler weighs the daemon's
    git with the daemon. One that outlives its timeout is killed and reaped."""
    fake = tmp_path / "git"
    seen = tmp_path / "seen"
    fake.write_text(f'#!/bin/sh\necho "$$ $(ps -o sid= -p $$)" > {seen}\nexec sleep 60\n')
    fake.chmod(0o755)
    monkeypatch.setenv("GIT_PYTHON_GIT_EXECUTABLE", str(fake))
    with pytest.raises(TimeoutError):
        await gitcmd.run_async(tmp_path, "status", repository=False, timeout=0.5)
    pid, sid = (int(word) for word in seen.read_text().split())
    assert sid == os.getsid(0)
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(pid, os.WNOHANG)
