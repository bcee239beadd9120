"""The death watch: the groups a process lists die with it, a ``kill -9`` included, and
only those: a group forgotten (its run reaped) is left alone, and a watch that was itself
killed is started again with every group still listed.

The owner is a real process (Python running :mod:`pokeralphd.deathwatch`), killed for
real; its groups are real process groups of sleeps."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pokeralphd.deathwatch import STARTS_MAX, DeathWatch
from tests.helpers import group_processes, pid_alive, wait_until

SLEEP_GROUP = ["/bin/sh", "-c", "sleep 300 & sleep 300 & wait"]

# The owner: starts three groups of sleeps, watches the first two, forgets the second;
# then, by mode: waits to be killed ("kill"); kills its watch first and starts a fourth
# group, watched ("kill-watch"); forks a child that lives on, then waits to be killed
# ("fork": the child's pid is listed last); or forgets the first too and exits ("exit").
OWNER = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    from pokeralphd.deathwatch import DeathWatch
    argv, mode = {argv!r}, {mode!r}
    watch = DeathWatch()
    groups = [subprocess.Popen(argv, start_new_session=True).pid for _ in range(3)]
    watch.watch(groups[0])
    watch.watch(groups[1])
    watch.forget(groups[1])
    if mode == "kill-watch":
        first = watch.pid
        os.kill(first, signal.SIGKILL)
        os.waitpid(first, 0)
        groups.append(subprocess.Popen(argv, start_new_session=True).pid)
        watch.watch(groups[3])
        assert watch.pid != first
    if mode == "exit":
        watch.forget(groups[0])
    if mode == "fork":  # a child that lives on must not keep the watch waiting
        child = os.fork()
        if child == 0:
            signal.pause()
        groups.append(child)
    print(" ".join(map(str, groups)), watch.pid, flush=True)
    if mode == "exit":
        sys.stdin.read()  # until the test has seen the sleeps
        sys.exit(0)
    signal.pause()
    """
)


def _group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not ended."""
    return [pid for pid, state, _ in group_processes(pgid) if state != "Z"]


def _run_owner(mode: str) -> tuple[list[int], int, int | None]:
    """Start the owner, read its groups, its watch and its forked child (mode "fork"),
    end it (kill -9, or let it exit)."""
    code = OWNER.format(argv=SLEEP_GROUP, mode=mode)
    root = str(Path(__file__).resolve().parents[2])
    owner = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert owner.stdout is not None and owner.stdin is not None
    *groups, watch = map(int, owner.stdout.readline().split())
    forked = groups.pop() if mode == "fork" else None
    wait_until(lambda: all(len(_group(g)) == 3 for g in groups), what="the sleeps")
    if mode != "exit":
        owner.send_signal(signal.SIGKILL)
    owner.stdin.close()
    assert owner.wait() == (0 if mode == "exit" else -signal.SIGKILL)
    owner.stdout.close()
    return groups, watch, forked


@pytest.mark.parametrize("mode", ["kill", "kill-watch", "fork", "exit"])
def test_the_groups_listed_die_with_their_owner_and_no_other(mode: str) -> None:
    """kill: the first group dies with its owner; the forgotten and the unlisted live on.
    kill-watch: the watch was killed, the next one lists the first and the fourth group.
    fork: the same, with a forked child of the owner alive (it closed its copy of the
    watch's pipe). exit: an owner that forgot all its groups and exited (a daemon
    stopped cleanly)."""
    groups, watch, forked = _run_owner(mode)
    try:
        wait_until(lambda: not pid_alive(watch), what="the watch gone")
        watched = [] if mode == "exit" else [groups[0], *groups[3:]]
        wait_until(lambda: not any(_group(g) for g in watched), what="the watched groups ended")
        alive = [g for g in groups if g not in watched]
        assert all(len(_group(g)) == 3 for g in alive)
        assert forked is None or pid_alive(forked)  # the watch did not wait for it
    finally:
        if forked is not None:
            os.kill(forked, signal.SIGKILL)  # re-parented: init reaps it
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_watch_that_keeps_dying_is_given_up(caplog: pytest.LogCaptureFixture) -> None:
    """A shell that exits at once (here: ``false``) is started again at each line, a
    bounded number of times, then given up with a warning."""
    watch = DeathWatch(shell=shutil.which("false") or "/bin/false")

    def given_up() -> bool:
        return any("death watch died" in r.getMessage() for r in caplog.records)

    seen: set[int] = set()
    for group in range(1, 200):
        watch.watch(group)
        if given_up():
            break
        pid = watch.pid  # None: it died as it was told the groups, retired
        if pid is not None:
            seen.add(pid)
            wait_until(lambda: not pid_alive(pid), what="the watch to exit")  # noqa: B023
    # some died before they were seen: as they were told the groups, or just after
    assert given_up() and len(seen) <= STARTS_MAX
    watch.watch(999)
    assert watch.pid is None  # nothing more is started
    [said] = [r.getMessage() for r in caplog.records if "death watch died" in r.getMessage()]
    assert f"died {STARTS_MAX} times" in said


def test_a_missing_shell_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = DeathWatch(shell=str(tmp_path / "no-shell"))
    broken.watch(1)
    broken.watch(2)
    said = [r for r in caplog.records if "no death watch" in r.getMessage()]
    assert len(said) == 1 and broken.pid is None
