"""Completion detection, prompts, feedback-loop detection and the git service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pokeralphd.agents.base import AgentOutcome
from pokeralphd.battle.completion import SIGIL, completion_problems, detect_completion
from pokeralphd.battle.feedback import detect_loops, resolve_loops, run_loop
from pokeralphd.battle.gitservice import GitService, has_identity
from pokeralphd.battle.judging import agent_words
from pokeralphd.battle.prompt import MAX_PROMPT, build_task_prompt
from pokeralphd.domain.models import PRD, FeedbackResult, Iteration, Task
from pokeralphd.errors import InvalidState
from tests.fakeclock import FakeClock
from tests.helpers import make_git_repo, pid_alive

BLOCK = {
    "type": "BATTLE_COMPLETE",
    "version": 1,
    "taskId": "001-a",
    "summary": "s",
    "acceptanceCriteriaMet": [{"criterion": "c", "met": True, "evidence": "e"}],
    "confidence": 0.7,
}


def test_completion_forms() -> None:
    assert detect_completion(["nothing here"]) is None
    assert detect_completion([f"done {SIGIL}"]).kind == "sigil"  # type: ignore[union-attr]
    block = detect_completion(
        ["<completion>\n```json\n" + json.dumps(BLOCK) + "\n```\n</completion>"], "001-a"
    )
    assert (
        block is not None
        and block.kind == "block"
        and block.acceptance_criteria_met[0].evidence == "e"
    )
    other = dict(BLOCK, taskId="002-b")
    assert detect_completion([f"<completion>{json.dumps(other)}</completion>"], "001-a") is None
    assert (
        "names task '002-b'"
        in completion_problems([f"<completion>{json.dumps(other)}</completion>"], "001-a")[0]
    )
    assert "not valid JSON" in completion_problems(["<completion>{oops</completion>"])[0]
    # a plain-text agent's words come a line at a time: a block over many lines is one
    printed = AgentOutcome(exit_code=0, reason="exited")
    printed.add_texts(["<completion>", *json.dumps(BLOCK, indent=2).splitlines()])
    printed.add_texts(["</completion>"])
    assert detect_completion(agent_words(printed), "001-a") == block
    # a streaming agent's messages stay apart: a tag in one does not pair with another's
    said = AgentOutcome(exit_code=0, reason="exited")
    for text in ("<completion>", json.dumps(BLOCK), "</completion>"):
        said.add_text(text)
    assert detect_completion(agent_words(said), "001-a") is None


@given(st.text(max_size=200), st.text(max_size=200))
def test_a_block_anywhere_is_found(before: str, after: str) -> None:
    text = (
        before.replace("<", "")
        + "<completion>"
        + json.dumps(BLOCK)
        + "</completion>"
        + after.replace("<", "")
    )
    assert detect_completion([text], "001-a") is not None


@given(st.lists(st.text(max_size=100), max_size=5))
def test_completion_never_raises(texts: list[str]) -> None:
    detect_completion(texts)
    completion_problems(texts)


def _prd() -> tuple[PRD, Task]:
    task = Task(
        id="001-a",
        title="Do A",
        description="Describe A",
        acceptance_criteria=["alpha works", "beta works"],
    )
    return PRD(name="P", description="A project", tasks=[task]), task


def test_prompt_has_what_the_agent_needs() -> None:
    prd, task = _prd()
    failed = Iteration(
        number=1,
        started_at=datetime.now(UTC),
        result="success",
        output="tried",
        feedback_results={
            "test": FeedbackResult(
                passed=False, output="E   assert 2 == 3\nFAILED test_x", command="pytest"
            )
        },
    )
    prompt = build_task_prompt(
        prd,
        task,
        2,
        5,
        [failed],
        "use pathlib",
        ["You signalled completion, but test failed"],
        ["test", "lint"],
    )
    for needle in (
        "Task ID: 001-a",
        "1. alpha works",
        "2. beta works",
        "Iteration: 2 of 5",
        "assert 2 == 3",
        "use pathlib",
        SIGIL,
        '"taskId": "001-a"',
        "signalled completion",
        "test, lint",
        "Do not commit",
    ):
        assert needle in prompt


@settings(max_examples=20)
@given(st.integers(min_value=0, max_value=300_000))
def test_prompt_is_bounded(size: int) -> None:
    prd, task = _prd()
    task = task.model_copy(update={"description": "d" * (size + 1)})
    huge = Iteration(
        number=1,
        started_at=datetime.now(UTC),
        result="failure",
        error="e" * (size + 1),
        output="o" * size,
        feedback_results={"test": FeedbackResult(passed=False, output="x\n" * size)},
    )
    prompt = build_task_prompt(prd, task, 2, 5, [huge] * 6, "n" * size, [], ["test"])
    assert (
        len(prompt.encode()) <= MAX_PROMPT + 200 and "Task ID: 001-a" in prompt and SIGIL in prompt
    )


def test_loop_detection(tmp_path: Path) -> None:
    node = tmp_path / "node"
    node.mkdir()
    (node / "package.json").write_text(
        json.dumps({"scripts": {"test": "vitest", "lint": "eslint ."}})
    )
    (node / "pnpm-lock.yaml").write_text("")
    assert detect_loops(node) == {"test": "pnpm run test", "lint": "pnpm run lint"}
    py = tmp_path / "py"
    py.mkdir()
    (py / "pyproject.toml").write_text("[tool.pytest.ini_options]\n[tool.ruff]\n[tool.mypy]\n")
    assert detect_loops(py) == {
        "test": "python3 -m pytest -q",
        "lint": "ruff check .",
        "typecheck": "mypy .",
    }
    go = tmp_path / "go"
    go.mkdir()
    (go / "go.mod").write_text("module x\n")
    (go / "Makefile").write_text("lint:\n\tgolangci-lint run\n")
    assert detect_loops(go)["lint"] == "make lint" and detect_loops(go)["test"] == "go test ./..."
    assert resolve_loops(["test", "lint", "x"], {"test": "a", "lint": "b"}, {"lint": "c"}) == {
        "test": "a",
        "lint": "c",
        "x": None,
    }


@pytest.mark.anyio
async def test_run_loop_pass_fail_timeout(tmp_path: Path) -> None:
    ok = await run_loop("test", "echo hello; true", tmp_path, 30)
    assert ok.passed and "hello" in ok.output and ok.exit_code == 0 and ok.duration is not None
    bad = await run_loop("test", "printf 'x%.0s' $(seq 1 10000); exit 3", tmp_path, 30)
    assert (
        not bad.passed and bad.exit_code == 3 and "trimmed" in bad.output and len(bad.output) < 4200
    )
    pidfile = tmp_path / "pid"
    # A short timeout, lengthened only if it ended the shell before it had started its
    # child (a loaded machine): the point is what happens to that child.
    for timeout in (0.05, 0.4, 3.2):
        slow = await run_loop("test", f"sleep 60 & echo $! > {pidfile}; wait", tmp_path, timeout)
        assert not slow.passed and "timed out" in slow.output
        if pidfile.exists() and pidfile.read_text().strip():
            break
    pid = int(pidfile.read_text())
    assert not pid_alive(pid)
    missing = await run_loop("lint", None, tmp_path, 1)
    assert not missing.passed and "feedbackCommands.lint" in missing.output


def test_git_changes_commits_and_revert(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r", {"a.txt": "a\n", "b.txt": "b\n"})
    (repo / "mine.txt").write_text("the user's own edit\n")  # dirty before the iteration
    git = GitService(repo)
    snap = git.snapshot()
    (repo / "a.txt").write_text("changed\n")
    (repo / "b.txt").unlink()
    (repo / "new.txt").write_text("new\n")
    (repo / ".pokeralph").mkdir()
    (repo / ".pokeralph" / "x.json").write_text("{}")
    changed = git.changed_since(snap)
    assert changed == ["a.txt", "b.txt", "new.txt"]
    sha = git.commit(changed, "[PokéRalph] 001-a: Do A")
    assert sha and git.head() == sha
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert "mine.txt" in status and "a.txt" not in status  # the user's edit was not swept in
    assert git.commit([], "nothing") is None
    revert = git.revert_last("[PokéRalph] 001-a")
    assert revert != sha and (repo / "b.txt").exists()
    with pytest.raises(InvalidState):
        git.revert_last("[PokéRalph] 001-a")  # HEAD is now the revert, not ours


def test_git_fallback_author(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in (
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
    ):
        monkeypatch.delenv(var, raising=False)
    repo = tmp_path / "bare"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("x")
    sha = GitService(repo).commit(["f.txt"], "[PokéRalph] 001-a: first")
    assert sha
    author = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%an <%ae>"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    ).stdout.strip()
    assert author == "pokeralph <pokeralph@localhost>"


def test_the_git_service_runs_one_git_command_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step is one short ``git`` command: no ``git cat-file`` helpers (a git.Repo per
    call once started two each time), and the review diff asks ``git status`` once however
    many files are new (it once asked twice per new file)."""
    shim, calls = _counting_git(tmp_path)
    repo = make_git_repo(tmp_path / "r", {"a.txt": "a\n"})
    base = GitService(repo).head()
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    git = GitService(repo)
    (repo / "a.txt").write_text("changed\n")
    sha = git.commit(["a.txt"], "[PokéRalph] 001-a: Do A")
    assert sha and git.head() == sha
    for i in range(5):
        (repo / f"new{i}.txt").write_text("new\n")
    before = calls.read_text().split()
    stat, _ = git.diff(base)
    assert "new files not yet added to git: new0.txt" in stat
    assert calls.read_text().split()[len(before) :].count("status") == 1
    git.revert_last("[PokéRalph] 001-a")
    assert "cat-file" not in calls.read_text().split()


def test_an_iterations_commit_is_one_git_process_unless_it_adds_a_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: an iteration's git steps are its two ``git status`` and one ``git
    commit``, and a ``git add`` only for files git does not know yet (``commit -- paths``
    commits a known path's change or deletion itself). The identity is asked once while
    the config files are unchanged (a commit changes ``.git``, not its config), and the
    new commit's hash is read from the branch's ref, not asked of ``git rev-parse``."""
    shim, calls = _counting_git(tmp_path)
    real_git = str(shutil.which("git"))  # before the shim is on PATH
    repo = make_git_repo(tmp_path / "r", {"a.txt": "a\n", "b.txt": "b\n"})
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")

    def real(*args: str) -> str:
        done = subprocess.run([real_git, "-C", str(repo), *args], capture_output=True, text=True)
        return done.stdout

    git = GitService(repo)
    steps: list[list[str]] = []
    for i in range(4):
        snap = git.snapshot()
        before = len(calls.read_text().split()) if calls.exists() else 0
        (repo / "a.txt").write_text(f"{i}\n")
        if i == 2:
            (repo / "new.txt").write_text("new\n")
        if i == 3:
            (repo / "b.txt").unlink()
        sha = git.commit(git.changed_since(snap), f"[PokéRalph] 001-a: {i}")
        assert sha is not None and sha == real("rev-parse", "HEAD").strip()
        steps.append(calls.read_text().split()[before:])
    assert steps[1] == ["status", "commit"]  # the snapshot's status came before `before`
    assert steps[2] == ["status", "add", "commit"]
    assert steps[3] == ["status", "commit"]
    assert real("ls-tree", "--name-only", "HEAD").split() == ["a.txt", "new.txt"]
    assert real("status", "--porcelain") == ""
    assert calls.read_text().split().count("config") <= 2  # the overrides, the identity


def test_a_path_named_like_a_pattern_is_committed_or_restored_alone(tmp_path: Path) -> None:
    """A file an iteration made named ``*`` (or ``[a].txt``) is that file only: git
    would read it as a pattern matching every file, committing the user's own edit with
    it, or taking every file out of the index when it is restored."""
    repo = make_git_repo(tmp_path / "r", {"a.txt": "a\n", "b.txt": "b\n"})
    (repo / "a.txt").write_text("the user's own edit\n")
    git = GitService(repo)
    snap = git.snapshot()
    (repo / "*").write_text("star\n")
    (repo / "[ab].txt").write_text("brackets\n")
    changed = git.changed_since(snap)
    assert changed == ["*", "[ab].txt"]
    assert git.commit(changed, "[PokéRalph] 001-a: patterns") is not None

    def real(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        ).stdout

    assert real("show", "--name-only", "--format=", "HEAD").split() == ["*", "[ab].txt"]
    assert real("status", "--porcelain") == " M a.txt\n"  # the user's edit is still theirs
    (repo / "*").write_text("changed again\n")
    (repo / "?").write_text("new\n")
    assert git.restore(["*", "?"]) == ["*", "?"]
    assert (repo / "*").read_text() == "star\n" and not (repo / "?").exists()
    assert real("status", "--porcelain") == " M a.txt\n"
    assert real("ls-files").split() == ["*", "[ab].txt", "a.txt", "b.txt"]


def test_a_file_the_agent_moved_with_git_is_committed_moved(tmp_path: Path) -> None:
    """``git mv a b`` by the agent: both paths changed, and the commit holds the move (git
    status once showed it as one renamed entry, so only ``b`` was committed, a copy, and
    ``a``'s deletion was left staged)."""
    repo = make_git_repo(tmp_path / "r", {"a.txt": "hello\n"})
    git = GitService(repo)
    snap = git.snapshot()
    subprocess.run(["git", "-C", str(repo), "mv", "a.txt", "b.txt"], check=True)
    changed = git.changed_since(snap)
    assert changed == ["a.txt", "b.txt"]
    assert git.commit(changed, "[PokéRalph] 001-a: move") is not None
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""
    tree = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", "HEAD"], capture_output=True, text=True
    )
    assert tree.stdout.split() == ["b.txt"]


def test_an_agents_events_show_the_same_for_every_role(tmp_path: Path) -> None:
    """The implementer's iteration and a verifier's or reviewer's run show events through
    one OutputStream.show: a rule's or a person's decision reaches the log as a
    ``[pokeralph]`` line and subscribers as a notice (a role's log once showed none)."""
    from pokeralphd.agents.base import (
        AgentPermissionDecision,
        AgentPermissionRequest,
        AgentRateLimit,
        AgentText,
        PermissionAnswer,
    )
    from pokeralphd.battle.output import OutputStream
    from pokeralphd.protocol.events import Chunk

    published: list[list[Chunk]] = []
    stream = OutputStream(tmp_path / "run.log", published.append, 0)
    stream.open()
    ask = AgentPermissionRequest("r1", "Bash", {"command": "make test"}, "run the tests")
    for event in (
        AgentText("checking"),
        AgentRateLimit(status="allowed", resets_at=None, limit_type=None),
        AgentPermissionDecision(ask, PermissionAnswer(True, method="config_rule", rule_id="r-1")),
        AgentPermissionDecision(ask, PermissionAnswer(False, "not now", method="manual")),
    ):
        stream.show(event)
    stream.close()
    shown = [(c.kind, c.text) for chunks in published for c in chunks]
    assert shown == [
        ("text", "checking"),
        ("notice", "Bash allowed by rule r-1"),
        ("notice", "Bash denied by a person: not now"),
    ]
    log = (tmp_path / "run.log").read_text().splitlines()
    assert log == [
        "[pokeralph] Bash allowed by rule r-1",
        "[pokeralph] Bash denied by a person: not now",
    ]


def test_a_plain_text_agents_read_is_one_step_and_its_lines_stay_lines(tmp_path: Path) -> None:
    """The command backend's lines of one read: one event, shown as one chunk (or as few
    as fit MAX_CHUNK_TEXT, never cut), each line still one of the agent's words."""
    from pokeralphd.agents.base import AgentLines, AgentOutcome
    from pokeralphd.agents.command import CommandBackend
    from pokeralphd.battle.output import MAX_CHUNK_TEXT, OutputStream
    from pokeralphd.protocol.events import Chunk

    backend = CommandBackend()
    lines = [b"  first  ", b"", b"caf\xc3\xa9 \xff", b"   ", SIGIL.encode()]
    events = backend.parse_lines(lines)
    assert events == [AgentLines(["  first  ", "caf\u00e9 \ufffd", SIGIL])]
    assert backend.parse_lines([b"", b" "]) == []
    outcome = AgentOutcome(exit_code=0, reason="exited")
    outcome.add_texts(["a", SIGIL])
    assert detect_completion(list(outcome.texts)) is not None

    published: list[list[Chunk]] = []
    stream = OutputStream(tmp_path / "run.log", published.append, 0)
    stream.open()
    stream.raw_lines(lines)
    stream.show(events[0])
    long = ["x" * 6000] * 7  # 42,000 characters: three chunks, no line cut
    stream.show(AgentLines(long))
    stream.close()
    texts = [c.text for chunks in published for c in chunks]
    assert texts[0] == "  first  \ncaf\u00e9 \ufffd\n" + SIGIL
    assert [t.split("\n") for t in texts[1:]] == [["x" * 6000] * 2] * 3 + [["x" * 6000]]
    assert all(len(t) <= MAX_CHUNK_TEXT for t in texts)
    assert (tmp_path / "run.log").read_bytes() == b"\n".join(lines) + b"\n"


def _counting_git(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with a ``git`` that notes each subcommand in the file it returns too."""
    real_git = shutil.which("git")
    assert real_git
    calls = tmp_path / "calls"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$1" >> "{calls}"\nexec "{real_git}" "$@"\n')
    (shim / "git").chmod(0o755)
    return shim, calls


def test_git_that_cannot_run_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git that is not there is an InvalidState naming the cause and the remedy, not an
    internal error, at the first step that runs git (HEAD is read from the files where
    they say it plainly: no git is started for it)."""
    repo = make_git_repo(tmp_path / "repo")
    head = GitService(repo).head()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.delenv("GIT_PYTHON_GIT_EXECUTABLE", raising=False)
    git = GitService(repo)
    assert git.head() == head
    with pytest.raises(InvalidState) as info:
        git.snapshot()
    assert "cannot run git" in info.value.message and "install git" in info.value.data["hint"]


def test_an_empty_name_or_email_is_no_identity() -> None:
    """git refuses to commit with an empty name: then we commit as pokeralph."""
    assert has_identity("user.name Ada\nuser.email ada@example.com\n")
    assert not has_identity("user.name \nuser.email ada@example.com\n")
    assert not has_identity("user.name Ada\n")
    assert not has_identity("")


def test_git_named_by_gitpython_setting_runs_without_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands we start ourselves (show, diff, the worktrees') run the git GitPython
    runs: $GIT_PYTHON_GIT_EXECUTABLE when PATH has none. Without either, the error says so."""
    real = shutil.which("git")
    assert real is not None
    repo = make_git_repo(tmp_path / "repo")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("GIT_PYTHON_GIT_EXECUTABLE", real)
    shown, cut = GitService(repo).show(head, 10_000)
    assert "initial" in shown and not cut
    monkeypatch.delenv("GIT_PYTHON_GIT_EXECUTABLE")
    with pytest.raises(InvalidState) as info:
        GitService(repo).show(head, 10_000)
    assert "cannot run git" in info.value.message and "install git" in info.value.data["hint"]


@pytest.mark.anyio
async def test_many_battles_output_flushes_on_one_tick_within_the_window(tmp_path: Path) -> None:
    """A hundred battles' output streams (10 ms window), on a clock moved by hand: chunks
    that came at different moments of one window are all published at its end, in one
    go (so each subscriber's writer wakes once for them all, not once per battle), none
    later than one window after it came; nothing is published before."""
    from pokeralphd.battle.output import OutputStream, next_tick

    clock = FakeClock(start=1000.003)
    published: list[tuple[int, float]] = []
    came: dict[int, float] = {}

    async def sleep_until(deadline: float) -> None:
        await clock.sleep(deadline - clock.monotonic())

    def stream(i: int) -> OutputStream:
        return OutputStream(
            tmp_path / f"{i}.log",
            lambda _chunks: published.append((i, clock.monotonic())),
            10,
            now=clock.monotonic,
            sleep_until=sleep_until,
        )

    streams = [stream(i) for i in range(100)]
    async with anyio.create_task_group() as tg:
        for s in streams:
            tg.start_soon(s.run)
        for rounds in range(3):
            published.clear()
            tick = next_tick(clock.monotonic(), 0.010)
            step = (tick - clock.monotonic()) * 0.9 / len(streams)
            for i, s in enumerate(streams):  # spread over what is left of the window
                came[i] = clock.monotonic()
                s.chunk("text", f"line {i} of round {rounds}")
                clock.advance(step)
            clock.advance(tick - clock.monotonic() - 1e-6)  # just short of the tick
            await anyio.wait_all_tasks_blocked()
            assert published == []
            clock.advance(2e-6)  # past it
            await anyio.wait_all_tasks_blocked()
            assert sorted(i for i, _ in published) == list(range(100))
            assert len({at for _, at in published}) == 1  # one tick for all
            assert all(at - came[i] <= 0.010 + 1e-9 for i, at in published)
        tg.cancel_scope.cancel()


def test_one_windows_output_is_bounded_in_characters_and_the_rest_is_counted(
    tmp_path: Path,
) -> None:
    """An agent printing long lines fast: what one window publishes stays well under a
    subscriber's backlog (500 chunks of 16 KiB were an 8 MiB event), and the event says
    how many chunks were left out (the log has them)."""
    from pokeralphd.battle.output import MAX_PENDING_CHARS, OutputStream
    from pokeralphd.protocol.events import Chunk

    published: list[list[Chunk]] = []
    stream = OutputStream(tmp_path / "run.log", published.append, 0)  # flushed by hand
    for i in range(100):
        stream.chunk("text", f"{i:03d}" + "x" * (16 * 1024 - 3))
    stream.flush()
    (chunks,) = published
    kept, notice = chunks[:-1], chunks[-1]
    assert sum(len(c.text) for c in kept) <= MAX_PENDING_CHARS
    assert [c.text[:3] for c in kept] == [f"{i:03d}" for i in range(len(kept))]
    assert notice == Chunk("notice", f"[{100 - len(kept)} chunks coalesced away; see the log]")
    stream.chunk("text", "after")  # the next window starts afresh
    stream.flush()
    assert published[-1] == [Chunk("text", "after")]


def test_an_agents_words_are_kept_bounded_and_judged_as_if_all_were() -> None:
    """An agent printing for long (here 60 MiB of lines) leaves its outcome holding a
    few hundred KiB, not every line (a hundred flooding battles grew the daemon by
    400 MiB),
    yet the completion signal said early on, the last block and the last word are
    judged as they would be with every line kept."""
    from pokeralphd.agents.base import TEXT_MARKED, TEXT_TAIL, AgentOutcome
    from pokeralphd.battle.judging import agent_words, output_summary

    outcome = AgentOutcome(exit_code=0, reason="exited")
    block = "<completion>" + json.dumps(BLOCK) + "</completion>"
    outcome.add_text(f"all done {SIGIL}")
    for i in range(600_000):
        outcome.add_text(f"line {i:07d} " + "x" * 88)
        if i == 300_000:
            outcome.add_text("a <completion>not json</completion> then")
            outcome.add_text(block)
    outcome.add_text("the last word")
    kept = sum(map(len, outcome.texts))
    assert kept <= 2 * TEXT_TAIL + TEXT_MARKED
    words = agent_words(outcome)
    assert SIGIL in words[0]
    signal = detect_completion(words, "001-a")
    assert signal is not None and signal.kind == "block"
    assert completion_problems(words, "001-a") == [
        "the <completion> block is not valid JSON (Expecting value at line 1)"
    ]
    assert output_summary(outcome, "") == "the last word"
    huge = AgentOutcome(exit_code=0, reason="exited")
    for _ in range(3):
        huge.add_text("y" * (TEXT_TAIL + TEXT_MARKED))  # longer than the tail: the last is kept
    assert huge.texts == ["y" * (TEXT_TAIL + TEXT_MARKED)]


def test_commits_take_the_identity_set_since_the_last_and_skip_an_empty_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity is asked once while the config files are unchanged: with none set a
    commit is pokeralph's; a name set in the repository's config afterwards is the next
    commit's. Paths that end up staged as HEAD has them make no commit (asked of `git
    commit` itself)."""
    import subprocess

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = make_git_repo(tmp_path / "repo")
    for key in ("user.name", "user.email"):
        subprocess.run(["git", "-C", str(repo), "config", "--unset", key], check=True)

    def author() -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%an <%ae>"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git = GitService(repo)
    (repo / "a.txt").write_text("a\n")
    assert git.commit(["a.txt"], "first") is not None
    assert author() == "pokeralph <pokeralph@localhost>"
    (repo / "b.txt").write_text("b\n")
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "Ada Changed"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "ada@x.test"], check=True)
    assert git.commit(["b.txt"], "second") is not None
    assert author() == "Ada Changed <ada@x.test>"
    head = git.head()
    (repo / "b.txt").write_text("b\n")  # rewritten as it was: nothing to commit
    assert git.commit(["b.txt"], "third") is None and git.head() == head


def test_a_refused_write_is_said_once_and_only_when_confined(tmp_path: Path) -> None:
    from pokeralphd.agents.base import AgentStderr, AgentToolResult
    from pokeralphd.battle.output import MAX_REFUSALS, OutputStream

    stream = OutputStream(tmp_path / "run.log", lambda chunks: None, 0)
    stream.open()
    line = "sh: 1: cannot create /home/u/x: Read-only file system"
    stream.show(AgentStderr(line))  # not confined: the agent's own words only
    stream.confined = True
    stream.show(AgentStderr(line))
    stream.show(AgentToolResult(line, is_error=True))  # the same refusal again
    stream.show(AgentToolResult("cannot create x: Read-only file system", is_error=False))
    for n in range(MAX_REFUSALS + 5):
        stream.show(AgentStderr(f"write {n}: [Errno 30] Read-only file system"))
    stream.close()
    said = [
        x for x in (tmp_path / "run.log").read_text().splitlines() if x.startswith("[pokeralph]")
    ]
    assert len(said) == MAX_REFUSALS
    assert said[0].startswith(f"[pokeralph] the sandbox refused a write ({line})")
    assert "sandbox.filesystem.readWrite" in said[0]


def test_the_log_is_written_every_log_interval_and_at_the_end(tmp_path: Path) -> None:
    """A stream publishes its chunks every window, but writes its log's lines at most
    every LOG_INTERVAL while they come (one write per stream per tick was 7% of the
    loop with a hundred agents printing); whatever is left is written when it closes."""
    from pokeralphd.battle.output import LOG_INTERVAL, OutputStream
    from pokeralphd.protocol.events import Chunk

    clock = FakeClock(start=1000.0)
    published: list[list[Chunk]] = []
    path = tmp_path / "run.log"
    stream = OutputStream(path, published.append, 10, now=clock.monotonic)
    stream.open()

    def written() -> list[str]:
        return path.read_text().splitlines()

    stream.raw(b"first\n")
    stream.chunk("text", "first")
    stream.flush()  # the first lines are written at once
    assert written() == ["first"] and len(published) == 1
    for i in range(9):  # nine more windows, inside the interval
        clock.advance(LOG_INTERVAL / 10)
        stream.raw(f"line {i}\n".encode())
        stream.chunk("text", f"line {i}")
        stream.flush()
    assert written() == ["first"] and len(published) == 10  # published, not yet written
    clock.advance(LOG_INTERVAL / 10 + 1e-6)
    stream.flush()
    assert written() == ["first", *(f"line {i}" for i in range(9))]
    stream.raw(b"last\n")
    stream.flush()
    assert written()[-1] == "line 8"
    stream.close()
    assert written()[-1] == "last"


@pytest.mark.anyio
async def test_a_stream_reads_the_loops_own_clock() -> None:
    """The clock ``anyio.current_time`` reads, asked directly (a tenth of its cost)."""
    import asyncio

    from pokeralphd.battle.output import loop_clock

    clock = loop_clock()
    assert clock == asyncio.get_running_loop().time
    before = anyio.current_time()
    assert before <= clock() <= anyio.current_time()


def test_outside_a_loop_the_clock_is_anyios() -> None:
    from pokeralphd.battle.output import loop_clock

    assert loop_clock() is anyio.current_time


@pytest.mark.anyio
async def test_the_logs_last_lines_are_written_when_the_agent_then_says_nothing(
    tmp_path: Path,
) -> None:
    """A flush inside the log interval leaves the lines for later; if nothing more comes
    (a long tool call), they are written once the interval has passed, not at the next
    word the agent says, which may be minutes away."""
    from pokeralphd.battle.output import LOG_INTERVAL, OutputStream

    path = tmp_path / "run.log"
    stream = OutputStream(path, lambda chunks: None, 10)
    stream.open()
    stream.raw(b"first\n")
    stream.flush()  # written at once
    stream.raw(b"then quiet\n")
    stream.flush()  # inside the interval: left for later
    assert path.read_text().splitlines() == ["first"]
    with anyio.fail_after(LOG_INTERVAL + 5):
        while path.read_text().splitlines() != ["first", "then quiet"]:
            await anyio.sleep(0.01)
    stream.close()
    assert path.read_text().splitlines() == ["first", "then quiet"]
