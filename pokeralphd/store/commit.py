"""Group commit: the daemon's writes to one document, many changes per durable write.

The daemon is the only writer of its ``.pokeralph/`` documents, so it keeps each one it
writes in memory (:class:`DocumentFile`): the value, its version, and the ``stat`` of
the file as we last read or wrote it. A write no longer re-reads and re-validates the
whole file; it only checks that the file is still the one we know (device, inode,
size, mtime and ctime), and re-reads and validates it if not (a hand edit, a ``git
checkout``, a file deleted or broken by hand: a broken file is named and never
overwritten, as before).

Changes to one file are committed as a group (:class:`GroupCommit`): the first change
to arrive is written at once; changes arriving while that write is in flight queue,
and the next write carries all of them. Each change is applied in order to the result
of the previous one and gets its own version (``expectedVersion`` is checked against
exactly that), so versions strictly increase and none is lost; a change that fails
(a stale ``expectedVersion``, a missing task, an invalid field) fails alone, and the
others of its batch go on. Every caller's acknowledgement waits until a durable write
(:func:`atomic_write`: temp file, fsync, rename, fsync of the folder) holding its change
has completed; if that write fails, every caller whose change it carried gets the
error and the file keeps its previous content and version. Events are published after
the durable write, in version order, before any caller is answered.

Waiting is shielded from cancellation: a change that was handed over is written (or
fails) whatever happens to its caller, like every write of the daemon.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
from pydantic import BaseModel

from pokeralph_core import documents, safefs
from pokeralph_core.atomic import atomic_write
from pokeralphd.errors import StorageError, VersionConflict
from pokeralphd.validation import validated

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from pokeralph_core.documents import DocumentKind, Fragments

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)

# st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns: what tells us the file changed
Signature = tuple[int, int, int, int, int]


def signature_of(info: os.stat_result) -> Signature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def signature(path: Path) -> Signature | None:
    """The file's identity and last change (None: no file), never through a link: a
    link there has its own signature, so reading it is attempted and refused."""
    try:
        with safefs.folder(path.parent) as fd:
            info = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StorageError(f"cannot look at {path}: {exc.strerror or exc}", file=str(path)) from exc
    return signature_of(info)


# ---------------------------------------------------------------------------- mechanism


class Request(Generic[P, R]):
    """One caller's change, waiting for the durable write that carries it."""

    __slots__ = ("_error", "_result", "_turn", "payload", "settled")

    def __init__(self, payload: P) -> None:
        self.payload = payload
        self.settled = False
        self._result: R | None = None
        self._error: BaseException | None = None
        self._turn = anyio.Event()  # set when settled, or when it is this one's turn to lead

    def resolve(self, result: R) -> None:
        if not self.settled:
            self.settled, self._result = True, result

    def fail(self, error: BaseException) -> None:
        if not self.settled:
            self.settled, self._error = True, error

    def outcome(self) -> R:
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


class GroupCommit(Generic[P, R]):
    """Leader and followers: whoever finds no write in flight writes; the others queue.

    ``commit(batch)`` is awaited with every request queued since the last write began,
    in the order they arrived; it settles each one (:meth:`Request.resolve` or
    :meth:`Request.fail`). If it raises, every request it left unsettled fails with that
    error. When a write ends, the first request still queued leads the next one, which
    takes everything queued by then; no background task is needed.
    """

    def __init__(self, commit: Callable[[list[Request[P, R]]], Awaitable[None]]) -> None:
        self._commit = commit
        self._queue: list[Request[P, R]] = []
        self._leading = False
        self.batches = 0  # writes led so far (tests and benchmarks read it)

    @property
    def busy(self) -> bool:
        return self._leading

    async def submit(self, payload: P) -> R:
        request: Request[P, R] = Request(payload)
        self._queue.append(request)
        with anyio.CancelScope(shield=True):
            if self._leading:
                await request._turn.wait()
            if not request.settled:
                await self._lead()
        return request.outcome()

    async def _lead(self) -> None:
        self._leading = True
        batch, self._queue = self._queue, []
        self.batches += 1
        try:
            await self._commit(batch)
        except BaseException as exc:
            for request in batch:
                request.fail(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            for request in batch:
                request.fail(RuntimeError("a batched write ended without settling a change"))
                request._turn.set()
            if self._queue:
                self._queue[0]._turn.set()  # it leads the next write
            else:
                self._leading = False


# ---------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class Durable(Generic[M]):
    """A document as it is on disk: value (None: no file), version, and the file's
    signature when we read or wrote it."""

    value: M | None
    version: int
    signature: Signature | None
    body: dict[str, Any] | None = None  # the JSON-ready body, when known (snapshot saves)
    fragments: Fragments = field(default_factory=dict)


@dataclass(eq=False)
class _Change(Generic[M]):
    """A change (a function of the current value) or a snapshot (a body to write unless
    the file holds it already); the batch fills in what became of it."""

    change: Callable[[M | None], M] | None
    body: dict[str, Any] | None
    expected: int | None
    on_durable: Callable[[M, int], None] | None
    value: M | None = None
    version: int = 0
    wrote: bool = False
    error: BaseException | None = None


class DocumentFile(Generic[M]):
    """One document the daemon writes, kept in memory, written by group commit.

    ``fragments_of`` names a list field whose items are never changed in place, only
    replaced (a PRD's tasks): their encoded bytes are kept, so a write re-encodes only
    new items (see :func:`documents.encode_with_fragments`).

    :meth:`current` blocks (call it in a worker thread); :meth:`update` and
    :meth:`save` are the async writes.
    """

    def __init__(self, kind: DocumentKind[M], path: Path, fragments_of: str | None = None) -> None:
        self.kind = kind
        self.path = path
        self._fragments_of = fragments_of
        self._state: Durable[M] | None = None  # None: not read yet
        self._lock = threading.Lock()  # one thread at a time reloads or writes
        self._commits: GroupCommit[_Change[M], tuple[M, int]] = GroupCommit(self._commit)
        self.writes = 0  # durable writes done

    @property
    def batches(self) -> int:
        return self._commits.batches

    # -- reading (blocking)
    def current(self) -> Durable[M]:
        """The document as it is on disk: from memory while the file is the one we last
        read or wrote, else read and validated again (:class:`CorruptFile` if broken)."""
        state = self._state
        if state is not None and signature(self.path) == state.signature:
            return state
        with self._lock:
            return self._fresh()

    def _fresh(self) -> Durable[M]:
        """(lock held) The cached state, re-read first if the file changed."""
        state = self._state
        if state is not None and signature(self.path) == state.signature:
            return state
        try:
            raw, info = documents.read_json_stat(self.path)
        except FileNotFoundError:
            fresh: Durable[M] = Durable(None, 0, None)
        else:
            loaded = documents.decode_document(self.kind, self.path, raw)
            # the signature of the very file read: a change after this is noticed
            fresh = Durable(loaded.value, loaded.version, signature_of(info))
        self._state = fresh
        return fresh

    # -- writing
    async def update(
        self,
        change: Callable[[M | None], M],
        expected: int | None = None,
        on_durable: Callable[[M, int], None] | None = None,
    ) -> tuple[M, int]:
        """Apply ``change`` to the current value (None: no file yet) and write the result
        as the next version; return it and its version once it is on disk.

        ``change`` runs in a worker thread, in the order the updates arrived, and must
        return a new object, leaving its argument as it is (the argument is what is on
        disk, shared with readers). With ``expected``, the change applies only if the
        document is at that version when its turn comes (else :class:`VersionConflict`).
        ``on_durable(value, version)`` runs on the event loop after the write, in
        version order, before any caller of the batch is answered: publish there.
        """
        return await self._commits.submit(_Change(change, None, expected, on_durable))

    async def save(self, value: M, body: dict[str, Any] | None = None) -> int:
        """Write ``value`` (as it is now) as the next version, unless the file holds
        exactly that already: then nothing is written. Returns the file's version.
        ``body``: ``value``'s dump, when the caller has it (built more cheaply)."""
        if body is None:
            body = value.model_dump(mode="json", by_alias=True)  # the snapshot, taken now
        _, version = await self._commits.submit(_Change(None, body, None, None))
        return version

    async def _commit(self, batch: list[Request[_Change[M], tuple[M, int]]]) -> None:
        await anyio.to_thread.run_sync(self._write_batch, [r.payload for r in batch])
        for request in batch:
            item = request.payload
            if item.error is not None:
                request.fail(item.error)
                continue
            assert item.value is not None
            if item.wrote and item.on_durable is not None:
                try:
                    item.on_durable(item.value, item.version)
                except Exception:  # a change on disk stays acknowledged
                    log.exception("after writing %s version %d", self.path, item.version)
            request.resolve((item.value, item.version))

    def _write_batch(self, items: list[_Change[M]]) -> None:
        """(worker thread) Apply every change in order, then write the result once."""
        with self._lock:
            state = self._fresh()  # a broken file fails the whole batch, unwritten
            value, version, body = state.value, state.version, state.body
            carried: list[_Change[M]] = []
            for item in items:
                if item.expected is not None and item.expected != version:
                    item.error = VersionConflict(self.path, item.expected, version)
                    continue
                try:
                    if item.change is not None:
                        new, new_body = item.change(value), None
                    else:
                        assert item.body is not None
                        if value is not None and body is None:
                            body = value.model_dump(mode="json", by_alias=True)
                        if value is not None and item.body == body:
                            item.value, item.version = value, version  # as it is: no write
                            continue
                        new = validated(self.kind.model, item.body, self.kind.name)
                        new_body = item.body
                except Exception as exc:
                    item.error = exc
                    continue
                value, body, version = new, new_body, version + 1
                item.value, item.version, item.wrote = value, version, True
                carried.append(item)
            if not carried:
                if body is not state.body:  # keep the body computed for the comparison
                    self._state = replace(state, body=body)
                return
            assert value is not None
            try:
                data, fragments = self._encode(value, version, body, state.fragments)
                atomic_write(self.path, data)
            except Exception as exc:  # the file keeps its previous content and version
                for item in carried:
                    item.error, item.wrote = exc, False
                return
            try:
                after = signature(self.path)
            except StorageError:
                after = None  # written all the same; read it again next time
            if after is not None and after[2] != len(data):
                after = None  # not what we wrote (changed at once): read it next time
            self._state = Durable(value, version, after, body, fragments)
            self.writes += 1

    def _encode(
        self, value: M, version: int, body: dict[str, Any] | None, fragments: Fragments
    ) -> tuple[bytes, Fragments]:
        if self._fragments_of is not None:
            return documents.encode_with_fragments(
                self.kind, value, version, self._fragments_of, fragments
            )
        if body is not None:
            return documents.encode_body(self.kind, body, version), {}
        return documents.encode_document(self.kind, value, version), {}
