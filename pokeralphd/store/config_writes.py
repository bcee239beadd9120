"""Writing the config layers: the repository's ``.pokeralph/config.json`` and the user's
file, each with the next version and atomically, and the user's trust records.

Reading, merging, validating and weighing trust are :mod:`pokeralph_core.config.layers`;
this module writes what a person asked for, validated the same way before anything is
written. The user layer is also written by other processes (a second daemon of the same
user, an older ``pokeralph-agent``), so each read-modify-write of it holds a thread lock
and a file lock (:func:`_user_write`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pokeralph_core.atomic import atomic_write
from pokeralph_core.config.layers import (
    CONFIG_SCHEMA_VERSION,
    TRUST_KEY,
    Trust,
    default_layer,
    layer_hash,
    layer_rules,
    load,
    lookup,
    merge,
    read_layer,
    read_raw,
    refuse_trust_key,
    refuse_user_only,
    repo_trust,
    sensitive_keys,
    split_document,
    trust_records,
    user_layer,
    validate,
)
from pokeralphd.errors import InvalidParams, PokeralphError, VersionConflict
from pokeralphd.store.locks import file_lock

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

log = logging.getLogger(__name__)

#: Serialises read-modify-write of the user layer (trust records, user settings and rules)
#: across repositories; the writes run in worker threads. Other processes: see
#: :func:`_user_write`.
_user_lock = threading.Lock()


def _document(layer: dict[str, Any], version: int) -> dict[str, Any]:
    return {"schemaVersion": CONFIG_SCHEMA_VERSION, "version": version, **layer}


@contextlib.contextmanager
def _user_write(user_file: Path) -> Iterator[None]:
    """Hold the user layer for one read-modify-write: against this daemon's other
    threads (:data:`_user_lock`) and against other processes that write it (a second
    daemon of the same user, an older ``pokeralph-agent``: the ``flock`` of
    :func:`pokeralphd.store.locks.file_lock`). The repository layer needs no such lock:
    one daemon holds the repository (``.pokeralph/daemon.lock``) and writes it under its
    own write lock."""
    with _user_lock, file_lock(user_file):
        yield


def write_layer(
    path: Path, layer: dict[str, Any], expected_version: int | None, mode: int | None = None
) -> int:
    """Write a layer with the next version, and return that version: the one this write
    produced (the caller holds the layer's lock, so no other write comes in between);
    the file keeps its permissions (``mode`` for a new one, else 0644)."""
    _, on_disk = read_layer(path)
    if expected_version is not None and expected_version != on_disk:
        raise VersionConflict(path, expected_version, on_disk)
    version = on_disk + 1
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644 if mode is None else mode
    doc = _document(layer, version)
    atomic_write(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode(), mode)
    return version


def _record(user_file: Path, root: Path, digest: str | None) -> bool:
    """Set (or with ``None`` remove) a repository's trust record; whether it changed.

    The caller holds :func:`_user_write`. A user layer edited by hand meanwhile is a
    :class:`VersionConflict`, never overwritten.
    """
    raw = read_raw(user_file)
    layer, version = split_document(raw)
    records = trust_records(layer, user_file)
    key = str(root)
    if records.get(key) == digest:
        return False
    if digest is None:
        records.pop(key)
    else:
        records[key] = digest
    if records:
        layer[TRUST_KEY] = records
    else:
        layer.pop(TRUST_KEY, None)
    # a new user config is private: it may hold the user's own agent.env secrets
    write_layer(user_file, layer, version, mode=0o600)
    return True


def update_repo_layer(
    user_file: Path,
    repo_file: Path,
    repo_root: Path,
    patch: dict[str, Any],
    expected_version: int | None,
) -> int:
    """Apply a user's ``patch`` to the repository layer; its new version.

    The daemon writes this content at the user's request, so a layer the user trusted
    before (or that set no sensitive key) stays trusted: its new hash is recorded. An
    untrusted layer stays untrusted; its sensitive keys keep being ignored.
    """
    refuse_user_only(patch, None)
    with _user_write(user_file):
        raw = read_raw(repo_file)
        layer, _ = split_document(raw)
        user, records, _ = user_layer(user_file)
        before = repo_trust(raw, records, repo_root)
        new_layer = merge(layer, patch)
        layer_rules(new_layer, None)  # names the rule by its index in this layer
        validate(merge(merge(default_layer(), user), new_layer), None)  # names the field
        version = write_layer(repo_file, new_layer, expected_version)
        if before.trusted and sensitive_keys(new_layer):
            digest = layer_hash(_document(new_layer, version))
            try:
                _record(user_file, repo_root, digest)
            except PokeralphError as exc:  # the write stands; the layer is untrusted now
                log.warning("could not record trust for %s: %s", repo_root, exc.message)
    return version


def set_trust(
    user_file: Path,
    repo_file: Path,
    repo_root: Path,
    trusted: bool,
    expected_hash: str | None = None,
) -> tuple[Trust, dict[str, Any], bool]:
    """Trust (or stop trusting) the repository layer as it is now.

    Returns the resulting :class:`Trust`, the values of the keys trust decides on (those
    that wait while the layer is untrusted), and whether the trust record changed. With
    ``expected_hash`` the layer is trusted only if it still has that hash (what the user
    read). A layer that would make the config invalid is refused, nothing recorded.
    """
    with _user_write(user_file):
        raw = read_raw(repo_file)
        layer, _ = split_document(raw)
        refuse_user_only(layer, repo_file)
        digest = layer_hash(raw)
        if trusted:
            if expected_hash is not None and expected_hash != digest:
                raise InvalidParams(
                    f"{repo_file} changed: its hash is {digest}, not {expected_hash}; "
                    "read it again",
                    field="hash",
                    hash=digest,
                )
            user, _, _ = user_layer(user_file)
            layer_rules(layer, repo_file)
            validate(merge(merge(default_layer(), user), layer), repo_file)
        changed = _record(user_file, repo_root, digest if trusted else None)
        try:  # weighed against the user's layer: which keys trust decides on
            untrusted = load(user_file, repo_file, repo_root, records_apply=False).trust
            state = load(user_file, repo_file, repo_root).trust
        except PokeralphError:  # an invalid layer may be untrusted all the same
            _, records, _ = user_layer(user_file)
            untrusted = state = repo_trust(raw, records, repo_root)
            untrusted = replace(untrusted, trusted_hash=None)
        values = {key: lookup(layer, key)[1] for key in untrusted.ignored_keys}
        return state, values, changed


def update_user_layer(
    user_file: Path, patch: dict[str, Any], expected_version: int | None = None
) -> int:
    """Apply a user's ``patch`` to the user layer (trust records kept); its new version.

    Validated before anything is written, alone and under the defaults. A new user
    config is private (it may hold the user's own ``agent.env`` secrets).
    """
    version = edit_user_layer(user_file, lambda _layer: patch, expected_version)
    assert version is not None
    return version


def edit_user_layer(
    user_file: Path,
    edit: Callable[[dict[str, Any]], dict[str, Any] | None],
    expected_version: int | None = None,
) -> int | None:
    """Read the user layer, let ``edit`` make a patch of what it holds now, write that:
    one read-modify-write under :func:`_user_write`, so that a change derived from the
    layer (one more rule in its list) is never lost to a write in between, from this
    daemon or another process. The version written, or ``None`` when ``edit`` returns
    ``None`` (nothing to change). ``edit`` gets the layer without ``schemaVersion`` and
    ``version``, its own copy; it may raise to refuse (nothing written).
    """
    with _user_write(user_file):
        raw = read_raw(user_file)
        layer, version = split_document(raw)
        patch = edit(copy.deepcopy(layer))
        if patch is None:
            return None
        refuse_trust_key(patch, None)
        new_layer = merge(layer, patch)
        layer_rules(new_layer, None)
        settings = {k: v for k, v in new_layer.items() if k != TRUST_KEY}
        validate(merge(default_layer(), settings), None)
        if expected_version is not None and expected_version != version:
            raise VersionConflict(user_file, expected_version, version)
        return write_layer(user_file, new_layer, version, mode=0o600)
