"""The effective config a repository's store keeps between reads: read again when either
layer's file changed (a hand edit of the same size, a user file behind a link, the
daemon's own writes), and never changed by a caller."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pokeralph_core.config.model import Config
from pokeralphd.domain.registry import RepoEntry
from pokeralphd.protocol import events as ev
from pokeralphd.store.repo_store import RepoStore

pytestmark = pytest.mark.anyio


class Sink:
    def publish(self, payload: ev.Payload, repo: str | None, task_id: str | None = None) -> None:
        pass


def _store(tmp_path: Path, user: Path) -> RepoStore:
    repo = tmp_path / "repo"
    repo.mkdir()
    store = RepoStore(RepoEntry(name="r", path=str(repo)), Sink(), user)
    store.open()
    return store


def _write(path: Path, layer: dict[str, object]) -> None:
    """As an editor would: the same file, written over in place."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"schemaVersion": 1, **layer}, f)


async def test_a_hand_edit_of_either_layer_is_read_at_once(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "pokeralph.json"
    target.parent.mkdir()
    _write(target, {"maxIterationsPerTask": 11})
    user = tmp_path / "config" / "config.json"
    user.parent.mkdir()
    user.symlink_to(target)  # a dotfile manager's link
    store = _store(tmp_path, user)
    assert (await store.config()).max_iterations_per_task == 11
    _write(target, {"maxIterationsPerTask": 12})  # same size, through the link
    assert (await store.config()).max_iterations_per_task == 12
    repo_file = store.files.config_path  # untrusted: it may lower the limit
    _write(repo_file, {"maxIterationsPerTask": 5})
    assert (await store.config()).max_iterations_per_task == 5
    _write(repo_file, {"maxIterationsPerTask": 4})
    assert (await store.config()).max_iterations_per_task == 4
    os.unlink(repo_file)
    assert (await store.config()).max_iterations_per_task == 12


async def test_the_daemons_writes_are_read_and_callers_get_their_own_copy(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, tmp_path / "user.json")
    first = await store.config()
    first.max_iterations_per_task = 99  # a caller's change stays its own
    first.agent.env["LEAK"] = "1"
    again = await store.config()
    assert again.max_iterations_per_task == Config().max_iterations_per_task
    assert "LEAK" not in again.agent.env
    await store.config_update({"maxIterationsPerTask": 7}, None)
    assert (await store.config()).max_iterations_per_task == 7
