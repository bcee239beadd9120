"""Issue 22: every acknowledged write carries the version its own write produced.

Fifty clients, each on its own connection to a daemon in the test's loop, write one
versioned document at once (no ``expectedVersion``): the versions in the replies are
exactly the versions written, one each, and the file on disk ends at the last of them.
A client that goes on with ``expectedVersion`` from its reply can then never overwrite a
change it did not see. Document by document: the repository's config layer
(``config.update``), the user's layer (``rules.add --user``, from two repositories at
once), the PRD (``prd.update``) and its tasks (``task.create``, ``task.update``,
``task.delete``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import make_git_repo
from tests.inproc import InProcDaemon, running_daemon

pytestmark = pytest.mark.anyio

WRITERS = 50


def _version(path: Path) -> int:
    version: int = json.loads(path.read_text())["version"]
    return version


async def _at_once(d: InProcDaemon, write: Callable[[Any, int], Awaitable[Any]]) -> list[Any]:
    """``write(client, n)`` by :data:`WRITERS` clients at once; their replies."""
    replies: list[Any] = []

    async def one(n: int) -> None:
        async with d.client() as client:
            replies.append(await write(client, n))

    async with anyio.create_task_group() as tg:
        for n in range(WRITERS):
            tg.start_soon(one, n)
    return replies


def _exactly_once(acked: list[int], before: int) -> None:
    """The acknowledged versions are the versions written after ``before``, one each."""
    assert sorted(acked) == list(range(before + 1, before + WRITERS + 1)), sorted(acked)


async def test_config_update_acknowledges_the_version_it_wrote(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    layer = repo / ".pokeralph" / "config.json"
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        before = (await d.call("config.get", {"repo": str(repo)}))["version"]

        async def write(client: Any, n: int) -> Any:
            patch = {"agent": {"env": {f"W{n}": str(n)}}}
            reply = await client.call("config.update", {"repo": str(repo), "patch": patch})
            return n, reply

        replies = await _at_once(d, write)
        _exactly_once([r["version"] for _, r in replies], before)
        for n, reply in replies:  # the layer each reply shows is the one its write made
            env = reply["repoLayer"]["agent"]["env"]
            assert env.get(f"W{n}") == str(n)
            assert len(env) == reply["version"] - before
        assert _version(layer) == before + WRITERS
        env = json.loads(layer.read_text())["agent"]["env"]
        assert env == {f"W{n}": str(n) for n in range(WRITERS)}  # no update lost


async def test_the_user_layer_loses_no_rule_added_from_two_repositories(home: Path) -> None:
    first, second = make_git_repo(home / "one"), make_git_repo(home / "two")
    async with running_daemon(home) as d:
        user_file = d.paths.user_config_file
        for repo in (first, second):
            await d.call("repo.register", {"path": str(repo)})
        before = _version(user_file) if user_file.exists() else 0

        async def write(client: Any, n: int) -> Any:
            return await client.call(
                "rules.add",
                {
                    "repo": str(first if n % 2 else second),
                    "scope": "user",
                    "toolName": "Bash",
                    "paramPattern": f'^\\{{"command":"echo {n}"\\}}$',
                    "description": f"writer {n}",
                    "decision": "allow",
                },
            )

        replies = await _at_once(d, write)
        assert len({r["rule"]["id"] for r in replies}) == WRITERS
        assert _version(user_file) == before + WRITERS
        on_disk = json.loads(user_file.read_text())["approvalRules"]
        assert sorted(r["description"] for r in on_disk) == sorted(
            f"writer {n}" for n in range(WRITERS)
        )


async def test_prd_update_acknowledges_the_version_it_wrote(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        before = (await d.call("prd.update", {"repo": str(repo), "name": "start"}))["version"]

        async def write(client: Any, n: int) -> Any:
            return await client.call("prd.update", {"repo": str(repo), "description": f"by {n}"})

        replies = await _at_once(d, write)
        _exactly_once([r["version"] for r in replies], before)
        for reply in replies:  # each reply is the PRD its own write produced
            assert reply["prd"]["description"].startswith("by ")
        by_version = {r["version"]: r["prd"]["description"] for r in replies}
        prd = json.loads((repo / ".pokeralph" / "prd.json").read_text())
        assert prd["version"] == before + WRITERS
        assert prd["description"] == by_version[before + WRITERS]


async def test_task_writes_acknowledge_the_version_they_wrote(home: Path) -> None:
    repo = make_git_repo(home / "repo")
    prd = repo / ".pokeralph" / "prd.json"
    async with running_daemon(home) as d:
        await d.call("repo.register", {"path": str(repo)})
        target = str(repo)

        async def create(client: Any, n: int) -> Any:
            fields = {"title": f"T{n}", "description": "d", "acceptanceCriteria": ["c"]}
            return await client.call("task.create", {"repo": target, **fields})

        created = await _at_once(d, create)
        _exactly_once([r["version"] for r in created], 0)
        ids = [r["task"]["id"] for r in created]
        assert len(set(ids)) == WRITERS

        async def update(client: Any, n: int) -> Any:
            params = {"repo": target, "taskId": ids[n], "description": f"n{n}"}
            return await client.call("task.update", params)

        updated = await _at_once(d, update)
        _exactly_once([r["version"] for r in updated], WRITERS)
        assert _version(prd) == 2 * WRITERS

        async def delete(client: Any, n: int) -> Any:
            return await client.call("task.delete", {"repo": target, "taskId": ids[n]})

        deleted = await _at_once(d, delete)
        _exactly_once([r["version"] for r in deleted], 2 * WRITERS)
        assert _version(prd) == 3 * WRITERS
        assert json.loads(prd.read_text())["tasks"] == []


PROCESS_WRITER = """
import json, sys
from pathlib import Path
from pokeralphd.store.config_writes import update_user_layer
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # every writer starts on the same word
versions = [
    update_user_layer(path, {"agent": {"env": {f"{name}_{n}": "x"}}}) for n in range(count)
]
print(json.dumps(versions))
"""


def test_processes_writing_the_user_layer_get_every_version_once(home: Path) -> None:
    """A second daemon of the same user, or an older ``pokeralph-agent``, writes the user
    layer from another process: the flock beside it keeps their writes apart."""
    import subprocess
    import sys

    user_file = home / "config" / "pokeralph" / "config.json"
    processes, each = 5, WRITERS // 5
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS_WRITER, str(user_file), f"P{p}", str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(processes)
    ]
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    acked: list[int] = []
    for writer in writers:
        out, _ = writer.communicate(timeout=60)
        assert writer.returncode == 0
        acked += json.loads(out)
    _exactly_once(acked, 0)
    assert _version(user_file) == WRITERS
    env = json.loads(user_file.read_text())["agent"]["env"]
    assert set(env) == {f"P{p}_{n}" for p in range(processes) for n in range(each)}
