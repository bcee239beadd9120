"""The daemon's sandbox service and ``proc.spawn``: a confined run stays owned.

bubblewrap is started as it is (it dies with the daemon by itself, and holds the command
while its group is lowered: no ``nice``, ``setpriv`` or death watch), so it leads the run's
process group; the run's token and the owner's mark reach every process inside;
``end_tree`` ends the whole tree; and a run's socket and proxy are gone when the run is.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import anyio
import psutil
import pytest
from anyio.abc import Process

from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.proc import AgentScope, ProcessOwner, end_tree, reap, spawn
from pokeralphd.procenv import TOKEN_VAR, token_processes
from pokeralphd.sandbox import probe
from pokeralphd.sandbox.service import SandboxService
from tests.helpers import (
    FORK_STORM,
    hold_up_lowering,
    make_git_repo,
    priority_escapes,
    short_tmpdir,
    wait_until,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}"),
]
SCOPE = AgentScope("battle", "repo", "001-t")


async def test_a_confined_run_is_owned_and_its_tree_ends_with_it(home: Path) -> None:
    tree = make_git_repo(home / "repo")
    runtime = short_tmpdir("prsv")
    served: list[str] = []

    async def serve_socket(path: str, scope: AgentScope, *, task_status: object) -> None:
        listener = await anyio.create_unix_listener(path)
        served.append(path)
        async with listener:
            task_status.started()  # type: ignore[attr-defined]
            await anyio.sleep_forever()

    service = SandboxService(runtime_dir=runtime, serve_socket=serve_socket)
    owner = ProcessOwner.anonymous()
    token = "sandbox-test-token"
    config = SandboxConfig.model_validate({"network": {"mode": "allowlist"}})
    async with service.run(config, tree=tree, scope=SCOPE, env={"HOME": str(home)}) as box:
        assert box.confined and box.env == {"POKERALPH_SANDBOX": "bwrap"}
        process = await spawn(
            ["/bin/sh", "-c", "sleep 60 & sleep 60 & echo started; wait"],
            cwd=str(tree),
            env={},
            owner=owner,
            token=token,
            confine=box,
        )
        try:
            assert process.stdout is not None
            assert (await process.stdout.receive()).strip() == b"started"
            leader = psutil.Process(process.pid)
            assert leader.name() == "bwrap" and box.contains  # nothing around it
            assert os.getpgid(process.pid) == process.pid  # bwrap leads the group

            def sleeping() -> list[psutil.Process]:
                return [p for p in token_processes(token) if p.name() == "sleep"]

            # the token reached the processes inside (once they have exec'd sleep)
            inside = wait_until(lambda: len(sleeping()) == 2 and sleeping(), what="sleeps")
            assert all(os.getpgid(p.pid) == process.pid for p in inside)
            assert all(p.environ()[TOKEN_VAR] == token for p in inside)
            await anyio.to_thread.run_sync(end_tree, process.pid, token, 2.0)
            await reap(process)
            assert not [p for p in inside if p.is_running() and p.status() != "zombie"]
            assert token_processes(token) == []
        finally:
            if process.returncode is None:
                process.kill()
                await reap(process)
        folder = Path(served[0]).parent
        assert (folder / "proxy.sock").exists()
    assert not folder.exists()  # the run's sockets are gone with it


async def test_off_a_secret_listing_and_the_runs_own_error() -> None:
    service = SandboxService(runtime_dir=short_tmpdir("prsv"))
    tree = make_git_repo(short_tmpdir("prsv") / "repo")
    off = SandboxConfig.model_validate({"mode": "off"})
    async with service.run(off, tree=tree, scope=SCOPE) as box:
        assert not box.confined and box.describe()["reason"] == "sandbox.mode is off"
        argv, _ = box.wrap(["/bin/true"], {}, str(tree))
        assert argv == ["/bin/true"]
    listed = SandboxConfig.model_validate({"filesystem": {"readOnly": ["~/.ssh"]}})
    with pytest.raises(Exception, match="never visible"):
        async with service.run(listed, tree=tree, scope=SCOPE):
            pass
    with pytest.raises(ValueError, match="the run's own"):  # as raised, not in a group
        async with service.run(SandboxConfig(), tree=tree, scope=SCOPE) as box:
            assert box.confined
            raise ValueError("the run's own")


async def test_a_confined_run_forking_at_once_runs_below_the_daemon_whatever_its_timing(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_nice, all of a confined run at once: the daemon lowers the group while
    bubblewrap holds the command (``--block-fd``, once ``--info-fd`` has said it cloned),
    so no fork is under way as the kernel walks the group. Lowered after the command had
    started, a child whose fork was under way copied the old priority before the walk and
    joined the group after it: a run that forks without pause (a build, a test runner)
    kept some of its processes at the daemon's priority (in every run of this test, with
    the daemon held up 30 ms after the start, as a busy machine holds it up)."""
    hold_up_lowering(monkeypatch, 0.03)
    tree = make_git_repo(home / "repo")
    service = SandboxService(runtime_dir=short_tmpdir("prsv"))
    owner = dataclasses.replace(ProcessOwner.anonymous(), nice=7)
    async with service.run(SandboxConfig(), tree=tree, scope=SCOPE, env={"HOME": str(home)}) as box:

        async def start() -> Process:
            argv = ["/bin/sh", "-c", FORK_STORM]
            return await spawn(argv, cwd=str(tree), env={}, owner=owner, confine=box)

        assert await priority_escapes(start, nice=7, trials=10) == []
