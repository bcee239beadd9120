"""Issue 14's parallel battles: two battles of one repository run at once, each in its
own git worktree, and both merge back; a conflicting pair escalates naming the files and
loses nothing; ``dependsOn`` orders ``battle.start all``; a cancel leaves no worktree or
branch; a daemon killed with two worktree battles running resumes both.

The agent is a tiny command-backend script: it writes a file named for its task (or a
shared one, for the conflict), says it started, and waits for a gate file the test opens
only after seeing *both* battles' ``iteration_start`` events. Were the battles run one
after another, the first could never finish and the test would time out: the overlap is
proved by events, not by timing.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphctl.client import Connection, RequestFailed
from tests.helpers import DaemonProcess, events_of, make_git_repo, wait_until

AGENT = """\
import os, sys, time
from pathlib import Path
sys.stdin.read()
task = os.environ["POKERALPH_TASK_ID"]
gate = os.environ.get("PAR_GATE")
name = os.environ.get("PAR_FILE") or task + ".txt"
Path(name).write_text(f"written by {task}\\n")
if gate:
    deadline = time.monotonic() + 60
    while not Path(gate).exists():
        if time.monotonic() > deadline:
            print("the gate never opened")
            sys.exit(3)
        time.sleep(0.01)
print("done <promise>COMPLETE</promise>")
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def setup(
    daemon: DaemonProcess,
    repo: Path,
    titles: list[str],
    *,
    gate: Path | None = None,
    shared_file: str | None = None,
    parallel: int = 2,
    depends: dict[int, list[int]] | None = None,
    **config: Any,
) -> list[str]:
    """Register ``repo`` with the gated agent and ``parallelBattles``; the task ids."""
    script = repo.parent / "agent.py"
    script.write_text(AGENT)
    wrapper = repo.parent / "agent.sh"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    wrapper.chmod(0o755)
    env = {}
    if gate is not None:
        env["PAR_GATE"] = str(gate)
    if shared_file is not None:
        env["PAR_FILE"] = shared_file
    daemon.call("repo.register", {"path": str(repo)})
    patch: dict[str, Any] = {
        "agent": {"backend": "command", "command": str(wrapper), "env": env},
        "mode": "yolo",
        "phases": ["implementation"],
        "feedbackLoops": ["test"],
        "feedbackCommands": {"test": "true"},
        "parallelBattles": parallel,
        "maxIterationsPerTask": 2,
    }
    patch.update(config)
    daemon.call("config.update", {"repo": str(repo), "patch": patch})
    ids: list[str] = []
    for k, title in enumerate(titles):
        params: dict[str, Any] = {
            "repo": str(repo),
            "title": title,
            "description": f"do {title}",
            "acceptanceCriteria": ["it is done"],
            "priority": k + 1,
        }
        if depends and k in depends:
            params["dependsOn"] = [ids[d] for d in depends[k]]
        ids.append(daemon.call("task.create", params)["task"]["id"])
    return ids


def worktree_root(home: Path) -> Path:
    return home / "state" / "pokeralph" / "worktrees"


def leftovers(home: Path, repo: Path) -> tuple[list[str], list[str]]:
    """Worktree folders under the daemon's state and pokeralph/ branches in ``repo``."""
    root = worktree_root(home)
    folders = sorted(str(p) for p in root.glob("*/*")) if root.exists() else []
    branches = git(repo, "branch", "--list", "pokeralph/*", "--format=%(refname:short)")
    return folders, [b for b in branches.splitlines() if b]


def start_running(
    daemon: DaemonProcess, conn: Connection, repo: Path, ids: list[str]
) -> list[dict[str, Any]]:
    """Start each of ``ids`` and read ``conn``'s events (subscribed already) until every
    one has begun its first iteration: all their agents run at that moment. The events."""
    for task in ids:
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
    started: set[str] = set()
    seen: list[dict[str, Any]] = []
    for event in events_of(conn, lambda e: False, 60):
        seen.append(event)
        if event["type"] == "iteration_start":
            started.add(event["taskId"])
            if started == set(ids):
                break
    assert started == set(ids)
    return seen


def until_ended(conn: Connection, ids: list[str]) -> list[dict[str, Any]]:
    """``conn``'s events until every battle of ``ids`` has completed, failed or escalated."""
    ended: set[str] = set()

    def over(e: dict[str, Any]) -> bool:
        if e["type"] in ("battle_complete", "battle_escalated", "battle_failed"):
            ended.add(e["taskId"])
        return ended == set(ids)

    return list(events_of(conn, over, 60))


def start_gated(
    daemon: DaemonProcess, repo: Path, ids: list[str], gate: Path
) -> list[dict[str, Any]]:
    """Start every battle, wait until all their agents run, open the gate and collect
    events until every battle has completed or escalated."""
    with daemon.connect(timeout=90) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        seen = start_running(daemon, conn, repo, ids)
        # all agents are running at this moment, each in its own worktree
        summaries = daemon.call("battle.current", {"repo": str(repo)})["battles"]
        assert {s["taskId"] for s in summaries} == set(ids)
        trees = {s["worktree"] for s in summaries}
        assert len(trees) == len(ids) and None not in trees
        assert all(str(worktree_root(daemon.home)) in t for t in trees)
        gate.write_text("open")
        seen += until_ended(conn, ids)
    return seen


def of(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    """The payloads of ``type_`` events, each with its task id."""
    return [{**e["payload"], "taskId": e["taskId"]} for e in events if e["type"] == type_]


def test_two_battles_run_at_once_in_their_own_worktrees_and_both_merge_back(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["Alpha", "Beta"], gate=gate)
    (repo / "mine.txt").write_text("the user's own uncommitted work\n")
    before = git(repo, "rev-parse", "HEAD")

    events = start_gated(daemon, repo, ids, gate)

    assert [e["taskId"] for e in of(events, "battle_failed")] == []
    assert {e["taskId"] for e in of(events, "battle_complete")} == set(ids)
    assert {e["taskId"] for e in of(events, "battle_merged")} == set(ids)
    # the agents never wrote in the user's tree: the files came by the merges
    log = git(repo, "log", "--format=%s", f"{before}..main")
    for task in ids:
        assert task in log
        assert (repo / f"{task}.txt").read_text() == f"written by {task}\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "mine.txt").read_text() == "the user's own uncommitted work\n"
    assert "mine.txt" in git(repo, "status", "--porcelain")
    # each battle's record says where it ran; nothing is left behind
    for task in ids:
        battle = daemon.call("battle.history", {"repo": str(repo), "taskId": task})["battle"]
        assert battle["status"] == "completed"
        assert battle["worktree"]["merged"] and battle["worktree"]["removed"]
        assert battle["worktree"]["baseBranch"] == "main"
    wait_until(lambda: leftovers(home, repo) == ([], []), 10, "worktrees and branches gone")
    assert "worktree" not in git(repo, "worktree", "list").split("\n", 1)[-1]


def test_a_conflicting_pair_escalates_naming_the_file_and_loses_nothing(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["Left", "Right"], gate=gate, shared_file="shared.txt")

    events = start_gated(daemon, repo, ids, gate)

    [merged] = of(events, "battle_merged")
    [failed] = of(events, "merge_failed")
    [escalated] = of(events, "battle_escalated")
    first, second = merged["taskId"], failed["taskId"]
    assert escalated["taskId"] == second and {first, second} == set(ids)
    assert failed["reason"] == "conflict" and failed["files"] == ["shared.txt"]
    escalation = escalated["escalation"]
    assert escalation["reason"] == "merge_conflict"
    assert "shared.txt" in escalation["message"]
    # the first battle's work is on main; the second's is intact on its branch
    assert (repo / "shared.txt").read_text() == f"written by {first}\n"
    branch = f"pokeralph/{second}"
    assert git(repo, "show", f"{branch}:shared.txt") == f"written by {second}"
    assert second in git(repo, "log", "-1", "--format=%s", branch)
    item = daemon.call("inbox.get", {"id": escalation["deliveryId"]})["delivery"]
    body = item["content"]["body"]
    assert "shared.txt" in body and branch in body
    # each answer is explained once, by the item itself
    assert body.count("Nothing is lost") == 1 and body.count("**retry**") == 1
    assert "retry" not in escalation["message"]
    summary = daemon.call("battle.current", {"repo": str(repo)})["battles"]
    assert [(s["taskId"], s["status"]) for s in summary] == [(second, "escalated")]

    # accept: the battle completes unmerged, its branch kept for the person
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call(
            "inbox.answer",
            {"id": escalation["deliveryId"], "values": {"values": {"action": "accept"}}},
        )
        done = list(events_of(conn, lambda e: e["type"] == "battle_complete", 30))
    assert not of(done, "battle_merged")
    removed = of(done, "worktree_removed")
    assert removed and removed[0]["branchKept"] is True
    folders, branches = leftovers(home, repo)
    assert folders == [] and branches == [branch]
    assert git(repo, "show", f"{branch}:shared.txt") == f"written by {second}"


def test_retry_after_a_conflict_merges_once_the_person_resolved_it(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["Left", "Right"], gate=gate, shared_file="shared.txt")
    events = start_gated(daemon, repo, ids, gate)
    [failed] = of(events, "merge_failed")
    [escalated] = of(events, "battle_escalated")
    second = failed["taskId"]
    # the person resolves it: main's version is dropped (a commit on main)
    git(repo, "rm", "-q", "shared.txt")
    git(repo, "commit", "-q", "-m", "drop shared.txt to take the other battle's")
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call(
            "inbox.answer",
            {
                "id": escalated["escalation"]["deliveryId"],
                "values": {"values": {"action": "retry"}},
            },
        )
        done = list(events_of(conn, lambda e: e["type"] in ("battle_complete",), 30))
    assert of(done, "battle_merged")
    assert (repo / "shared.txt").read_text() == f"written by {second}\n"
    wait_until(lambda: leftovers(home, repo) == ([], []), 10, "worktrees and branches gone")


def test_uncommitted_changes_in_the_way_escalate_and_are_never_touched(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    ids = setup(daemon, repo, ["Solo"], parallel=2)
    task = ids[0]
    before = git(repo, "rev-parse", "HEAD")
    (repo / f"{task}.txt").write_text("the user's draft\n")  # what the merge would write
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        daemon.call("battle.start", {"repo": str(repo), "taskId": task})
        events = list(events_of(conn, lambda e: e["type"] == "battle_escalated", 30))
    [failed] = of(events, "merge_failed")
    assert failed["reason"] == "dirty" and f"{task}.txt" in failed["message"]
    assert (repo / f"{task}.txt").read_text() == "the user's draft\n"
    assert git(repo, "rev-parse", "HEAD") == before  # main did not move
    assert task not in git(repo, "log", "--format=%s", "main")


def test_depends_on_orders_start_all_and_is_validated(daemon: DaemonProcess, home: Path) -> None:
    repo = make_git_repo(home / "repo")
    ids = setup(daemon, repo, ["Base", "Built on base", "Apart"], depends={1: [0]})
    base, built, apart = ids
    # validated at the edge: unknown ids, itself, cycles
    for deps, words in (
        (["999-nope"], "unknown"),
        ([built], "itself"),
    ):
        with pytest.raises(RequestFailed) as info:
            daemon.call("task.update", {"repo": str(repo), "taskId": built, "dependsOn": deps})
        assert words in info.value.message
    with pytest.raises(RequestFailed) as info:
        daemon.call("task.update", {"repo": str(repo), "taskId": base, "dependsOn": [built]})
    assert "cycle" in info.value.message and base in info.value.message
    # an explicit start with unmet dependencies is refused, naming them
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.start", {"repo": str(repo), "taskId": built})
    assert base in info.value.message

    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        result = daemon.call("battle.start", {"repo": str(repo), "all": True})
        assert result["started"] == [base, apart]
        assert result["waiting"] == [built]
        done: set[str] = set()

        def over(e: dict[str, Any]) -> bool:
            if e["type"] == "battle_complete":
                done.add(e["taskId"])
            return bool(e["type"] == "battles_scheduled" and e["payload"]["done"])

        events = list(events_of(conn, over, 60))
    order = [
        (e["type"], e["taskId"]) for e in events if e["type"] in ("battle_start", "battle_complete")
    ]
    assert order.index(("battle_complete", base)) < order.index(("battle_start", built))
    assert done == set(ids)
    # the dependent battle started from a HEAD that had its dependency's work
    battle = daemon.call("battle.history", {"repo": str(repo), "taskId": built})["battle"]
    assert base in git(repo, "log", "--format=%s", battle["baseCommit"])


def test_cancel_leaves_no_worktree_or_branch_and_ambiguous_controls_are_refused(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"  # never opened
    ids = setup(daemon, repo, ["One", "Two", "Three"], gate=gate)
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        start_running(daemon, conn, repo, ids[:2])
    shown = daemon.ctl("--repo", str(repo), "battle", "show")
    assert f"branch pokeralph/{ids[0]} in {worktree_root(home)}" in shown.stdout
    # a third is refused: parallelBattles is 2
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.start", {"repo": str(repo), "taskId": ids[2]})
    assert "parallelBattles" in info.value.message
    # no task id with two active: refused, naming both
    with pytest.raises(RequestFailed) as info:
        daemon.call("battle.pause", {"repo": str(repo)})
    assert ids[0] in info.value.message and ids[1] in info.value.message
    for task in ids[:2]:
        daemon.call("battle.cancel", {"repo": str(repo), "taskId": task})
    assert leftovers(home, repo) == ([], [])
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_kill9_with_two_worktree_battles_then_restart_resumes_both(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    first = DaemonProcess(home).start()
    try:
        ids = setup(first, repo, ["North", "South"], gate=gate)
        with first.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"repo": str(repo)})
            start_running(first, conn, repo, ids)
        first.kill9()
    finally:
        if first.proc is not None and first.proc.poll() is None:
            first.kill9()
    folders, branches = leftovers(home, repo)
    assert len(folders) == 2 and sorted(branches) == sorted(f"pokeralph/{t}" for t in ids)

    second = DaemonProcess(home).start()
    try:
        summaries = second.call("battle.current", {"repo": str(repo)})["battles"]
        assert sorted((s["taskId"], s["status"]) for s in summaries) == sorted(
            (t, "paused") for t in ids
        )
        assert all(s["worktree"] for s in summaries)
        gate.write_text("open")
        with second.connect(timeout=90) as conn:
            conn.call("events.subscribe", {"repo": str(repo)})
            for task in ids:
                second.call("battle.resume", {"repo": str(repo), "taskId": task})
            events = until_ended(conn, ids)
        assert {e["taskId"] for e in of(events, "battle_complete")} == set(ids)
        for task in ids:
            assert (repo / f"{task}.txt").read_text() == f"written by {task}\n"
        wait_until(lambda: leftovers(home, repo) == ([], []), 10, "worktrees and branches gone")
    finally:
        second.stop()


def test_the_cli_adds_dependencies_and_starts_all(daemon: DaemonProcess, home: Path) -> None:
    repo = make_git_repo(home / "repo")
    gate = home / "gate"  # never opened: the battles wait, the test cancels them
    (first,) = setup(daemon, repo, ["First"], gate=gate, parallel=1)
    added = daemon.ctl(
        "--repo", str(repo), "task", "add", "Second", "-d", "after first",
        "-c", "done", "--depends-on", first,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    second = daemon.call("task.list", {"repo": str(repo)})["tasks"][1]["id"]
    shown = daemon.ctl("--repo", str(repo), "task", "show", second)
    assert f"depends on:  {first}" in shown.stdout
    bad = daemon.ctl("--repo", str(repo), "task", "edit", first, "--depends-on", second)
    assert bad.returncode != 0 and "cycle" in bad.stderr
    refused = daemon.ctl("--repo", str(repo), "battle", "start", second)
    assert refused.returncode != 0 and first in refused.stderr
    started = daemon.ctl("--repo", str(repo), "battle", "start", "--all")
    assert started.returncode == 0, started.stderr
    assert f"started: {first}" in started.stdout and f"waiting: {second}" in started.stdout
    both = daemon.ctl("--repo", str(repo), "battle", "start", "--all", first)
    assert both.returncode != 0 and "not both" in both.stderr
    daemon.call("battle.cancel", {"repo": str(repo), "taskId": first})


def test_after_a_restart_a_cancelled_worktree_battle_leaves_nothing(home: Path) -> None:
    from tests.inproc import ThreadedDaemon

    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    first = ThreadedDaemon(home).start()
    try:
        ids = setup(first, repo, ["Kept", "Dropped"], gate=gate)
        with first.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"repo": str(repo)})
            start_running(first, conn, repo, ids)
    finally:
        first.stop()  # a clean stop: both left paused, their worktrees kept
    assert len(leftovers(home, repo)[0]) == 2
    second = ThreadedDaemon(home).start()
    try:
        kept, dropped = ids
        second.call("battle.cancel", {"repo": str(repo), "taskId": dropped})
        folders, branches = leftovers(home, repo)
        assert branches == [f"pokeralph/{kept}"] and len(folders) == 1 and kept in folders[0]
        gate.write_text("open")
        with second.connect(timeout=60) as conn:
            conn.call("events.subscribe", {"repo": str(repo)})
            second.call("battle.resume", {"repo": str(repo)})  # the one active: no id needed
            list(events_of(conn, lambda e: e["type"] == "battle_complete", 30))
        assert (repo / f"{kept}.txt").exists() and not (repo / f"{dropped}.txt").exists()
        wait_until(lambda: leftovers(home, repo) == ([], []), 10, "worktrees and branches gone")
    finally:
        second.stop()


def test_start_all_makes_its_worktrees_side_by_side(
    daemon: DaemonProcess, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``battle.start all`` starts what fits at once, not one after another (the last of
    ten once waited for the nine before it, worktrees and writes, under load for minutes):
    each worktree is made only once all three starts are making theirs. One after
    another, the first would wait for the others in vain and be refused."""
    from pokeralphd.battle import worktrees
    from pokeralphd.domain.models import BattleWorktree

    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["One", "Two", "Three"], gate=gate, parallel=3)
    create = worktrees.create
    arrived: list[str] = []
    everyone: list[anyio.Event] = []

    async def side_by_side(repo_path: Path, root: Path, task_id: str) -> BattleWorktree:
        if not everyone:
            everyone.append(anyio.Event())
        arrived.append(task_id)
        if len(arrived) == len(ids):
            everyone[0].set()
        with anyio.move_on_after(10):
            await everyone[0].wait()
        if not everyone[0].is_set():
            raise worktrees.GitFailed(["worktree", "add"], 1, "", f"{task_id} made it alone")
        return await create(repo_path, root, task_id)

    monkeypatch.setattr(worktrees, "create", side_by_side)
    with daemon.connect(timeout=90) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        result = daemon.call("battle.start", {"repo": str(repo), "all": True})
        assert result["refused"] == {}
        assert result["started"] == ids  # in priority order
        gate.write_text("open")
        until_ended(conn, ids)
    assert leftovers(home, repo) == ([], [])


def test_a_task_being_started_is_not_started_twice(
    daemon: DaemonProcess, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start is prepared outside the start lock now (its worktree, its folder): while
    one is under way, a second start of the same task is refused at once, naming it as
    starting, and the first goes on to run the one battle."""
    from pokeralphd.battle import worktrees
    from pokeralphd.domain.models import BattleWorktree

    repo = make_git_repo(home / "repo")
    gate = home / "gate"
    ids = setup(daemon, repo, ["One", "Two"], gate=gate, parallel=2)
    create = worktrees.create
    inside, release = threading.Event(), threading.Event()

    async def held(repo_path: Path, root: Path, task_id: str) -> BattleWorktree:
        inside.set()
        await anyio.to_thread.run_sync(release.wait, 10)
        return await create(repo_path, root, task_id)

    monkeypatch.setattr(worktrees, "create", held)
    first: dict[str, Any] = {}
    start = {"repo": str(repo), "taskId": ids[0]}
    thread = threading.Thread(target=lambda: first.update(daemon.call("battle.start", start)))
    with daemon.connect(timeout=90) as conn:
        conn.call("events.subscribe", {"repo": str(repo)})
        thread.start()
        assert inside.wait(30)
        with pytest.raises(RequestFailed) as info:
            daemon.call("battle.start", start)
        assert f"a battle for {ids[0]} is starting" in info.value.message
        release.set()
        thread.join(30)
        assert first["battle"]["taskId"] == ids[0]
        gate.write_text("open")
        until_ended(conn, ids[:1])
    assert leftovers(home, repo) == ([], [])
