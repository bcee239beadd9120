"""Nothing under .pokeralph/ is read or written through a link an agent planted.

Each test plants a link (or a hard link, a FIFO, a foreign folder) pointing outside the
repository, runs the real operation through the store's public API, and checks that the
outside file is untouched and that the error names the planted path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pokeralph_core import atomic, documents, safefs
from pokeralphd.battle.output import OutputStream
from pokeralphd.domain.inbox import Delivery
from pokeralphd.domain.models import PRD, Progress, Task
from pokeralphd.errors import StorageError
from pokeralphd.store.filemanager import PRD_KIND, PROGRESS_KIND, FileManager
from pokeralphd.store.inbox import InboxStore
from pokeralphd.store.locks import RepoLock

SECRET = b"precious: must never change\n"


def _prd() -> PRD:
    return PRD(
        name="p",
        description="d",
        tasks=[Task(id="001-a", title="A", description="d", acceptance_criteria=["c"])],
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the repository holding one file an attacker would like changed."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "target").write_bytes(SECRET)
    return path


def _untouched(outside: Path) -> None:
    assert (outside / "target").read_bytes() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["target"]


def _names(exc: StorageError, path: Path) -> None:
    assert str(path) in exc.message
    assert exc.data["file"] == str(path)


def _plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


# -- files planted as links


def test_a_lock_file_link_is_refused_and_no_pid_written_through(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    link = _plant(fm.lock_path, outside / "target")
    with pytest.raises(StorageError) as info:
        RepoLock(fm.lock_path).acquire()
    _names(info.value, link)
    assert "symbolic link" in info.value.message
    _untouched(outside)


def test_an_iteration_log_link_is_refused_by_append_log(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    link = _plant(fm.log_path("001-a", 1), outside / "target")
    with pytest.raises(StorageError) as info:
        fm.append_log("001-a", 1, b"agent output\n")
    _names(info.value, link)
    _untouched(outside)


def test_an_iteration_log_link_is_never_opened_by_the_output_stream(
    repo: Path, outside: Path
) -> None:
    fm = FileManager(repo)
    link = _plant(fm.log_path("001-a", 2), outside / "target")
    published: list[Any] = []
    stream = OutputStream(link, published.append, 0)
    stream.open()
    stream.raw(b"agent output")
    stream.close()
    assert stream.log_error is not None and str(link) in stream.log_error
    _untouched(outside)


def test_a_log_hard_linked_to_an_outside_file_is_not_appended_to(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    log = fm.log_path("001-a", 1)
    log.parent.mkdir(parents=True)
    os.link(outside / "target", log)
    with pytest.raises(StorageError) as info:
        fm.append_log("001-a", 1, b"agent output\n")
    _names(info.value, log)
    assert (outside / "target").read_bytes() == SECRET


def test_a_planted_temp_name_cannot_redirect_a_prd_write(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    # The name older versions used, predictable from the daemon's pid.
    _plant(fm.dir / f".prd.json.{os.getpid()}.tmp", outside / "target")
    prd = _prd()
    assert documents.save(PRD_KIND, fm.prd_path, prd) == 1
    _untouched(outside)
    loaded = fm.load_prd()
    assert loaded is not None and loaded.value == prd


def test_temp_names_are_unpredictable_and_cleared_by_our_pattern() -> None:
    first, second = atomic.temp_name("prd.json"), atomic.temp_name("prd.json")
    assert first != second
    assert atomic.TEMP_RE.match(first) and atomic.TEMP_RE.match(second)
    assert atomic.TEMP_RE.match(f".prd.json.{os.getpid()}.tmp")  # the old shape too


def test_a_document_link_is_not_read(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    theirs = documents.encode_document(PRD_KIND, _prd(), 7)
    (outside / "prd.json").write_bytes(theirs)
    link = _plant(fm.prd_path, outside / "prd.json")
    with pytest.raises(StorageError) as info:
        fm.load_prd()
    _names(info.value, link)
    with pytest.raises(StorageError):
        documents.save(PRD_KIND, fm.prd_path, _prd())
    assert (outside / "prd.json").read_bytes() == theirs


def test_a_dangling_document_link_is_refused_not_followed(repo: Path, tmp_path: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    nowhere = tmp_path / "created-by-the-write"
    link = _plant(fm.progress_path("001-a"), nowhere)
    with pytest.raises(StorageError) as info:
        documents.save(PROGRESS_KIND, fm.progress_path("001-a"), Progress(task_id="001-a"))
    _names(info.value, link)
    assert not nowhere.exists()


def test_atomic_write_refuses_a_link_as_its_target(repo: Path, outside: Path) -> None:
    link = _plant(repo / ".pokeralph" / "config.json", outside / "target")
    with pytest.raises(StorageError) as info:
        atomic.atomic_write(link, b"{}")
    _names(info.value, link)
    assert link.is_symlink()
    _untouched(outside)


def test_a_log_link_is_not_read_back(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    link = _plant(fm.log_path("001-a", 1), outside / "target")
    with pytest.raises(StorageError) as info:
        fm.read_log("001-a", 1)
    _names(info.value, link)


def test_a_planted_fifo_is_refused_without_hanging(repo: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    os.mkfifo(fm.prd_path)
    errors: list[BaseException] = []

    def load() -> None:
        try:
            fm.load_prd()
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(10)  # a deadline, not a wait: the load must have returned by then
    assert not reader.is_alive(), "opening a planted FIFO blocked"
    assert len(errors) == 1 and isinstance(errors[0], StorageError)
    assert "not a regular file" in errors[0].message


# -- folders planted as links


FOLDER_CASES = [
    (".pokeralph", "prd"),
    (".pokeralph/battles", "progress"),
    (".pokeralph/battles/001-a", "history"),
    (".pokeralph/battles/001-a/logs", "log"),
    (".pokeralph/inbox", "inbox"),
    (".pokeralph/inbox/deliveries/d_1_001", "inbox"),
    (".pokeralph/planning", "planning"),
]


def _operate(repo: Path, what: str) -> None:
    fm = FileManager(repo)
    if what == "prd":
        documents.save(PRD_KIND, fm.prd_path, _prd())
    elif what == "progress":
        documents.save(PROGRESS_KIND, fm.progress_path("001-a"), Progress(task_id="001-a"))
    elif what == "history":
        fm.create_battle_folder("001-a")
    elif what == "log":
        fm.append_log("001-a", 1, b"agent output\n")
    elif what == "inbox":
        delivery = Delivery(id="d_1_001", mode="passive", status="delivered", title="t")
        InboxStore(fm.dir).create(delivery)
    elif what == "planning":
        documents.save(PRD_KIND, fm.dir / "planning" / "session.json", _prd())


@pytest.mark.parametrize(("folder", "what"), FOLDER_CASES)
def test_a_folder_link_anywhere_on_the_way_is_refused(
    repo: Path, outside: Path, folder: str, what: str
) -> None:
    link = _plant(repo / folder, outside)
    with pytest.raises(StorageError) as info:
        _operate(repo, what)
    _names(info.value, link)
    assert "symbolic link" in info.value.message
    _untouched(outside)


@pytest.mark.parametrize(("folder", "what"), FOLDER_CASES)
def test_the_same_operations_work_without_links(repo: Path, folder: str, what: str) -> None:
    _operate(repo, what)  # the refusals above come from the links, not from the operation
    assert (repo / ".pokeralph").is_dir()


def test_pokeralph_as_a_link_is_refused_by_init_and_the_lock(repo: Path, outside: Path) -> None:
    link = _plant(repo / ".pokeralph", outside)
    fm = FileManager(repo)
    for operation in (fm.init, RepoLock(fm.lock_path).acquire):
        with pytest.raises(StorageError) as info:
            operation()
        _names(info.value, link)
    _untouched(outside)


def test_pokeralph_as_a_file_is_refused(repo: Path) -> None:
    (repo / ".pokeralph").write_text("not a folder")
    with pytest.raises(StorageError) as info:
        FileManager(repo).init()
    assert "not a directory" in info.value.message
    _names(info.value, repo / ".pokeralph")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_pokeralph_owned_by_another_user_is_refused(repo: Path) -> None:
    (repo / ".pokeralph").mkdir()
    os.chown(repo / ".pokeralph", 65534, 65534)
    with pytest.raises(StorageError) as info:
        FileManager(repo).init()
    assert "belongs to uid 65534" in info.value.message
    _names(info.value, repo / ".pokeralph")
    assert list((repo / ".pokeralph").iterdir()) == []


def test_init_refuses_a_link_deep_in_the_folder(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    link = _plant(fm.history_path("001-a"), outside / "target")
    with pytest.raises(StorageError) as info:
        fm.init()
    _names(info.value, link)
    _untouched(outside)


def test_inbox_existence_check_refuses_a_link(repo: Path, outside: Path) -> None:
    store = InboxStore(repo / ".pokeralph")
    link = _plant(store.folder("d_1_001") / "delivery.json", outside / "target")
    with pytest.raises(StorageError) as info:
        store.exists("d_1_001")
    _names(info.value, link)
    assert store.exists("d_1_002") is False


def test_battle_listing_refuses_a_battles_link(repo: Path, outside: Path) -> None:
    (outside / "001-outside").mkdir()
    link = _plant(repo / ".pokeralph" / "battles", outside)
    with pytest.raises(StorageError) as info:
        FileManager(repo).battle_task_ids()
    _names(info.value, link)


# -- stale temp files


def _dead_pid() -> int:
    with subprocess.Popen(["true"]) as proc:
        pass  # leaving the block waits for it
    return proc.pid


def test_init_removes_temp_files_of_killed_writes(repo: Path, outside: Path) -> None:
    fm = FileManager(repo)
    fm.init()
    fm.create_battle_folder("001-a")
    stale = [
        fm.dir / ".prd.json.4242.tmp",
        fm.dir / f".prd.json.4243.{'ab' * 8}.tmp",
        fm.battle_dir("001-a") / ".progress.json.4244.tmp",
        fm.dir / "inbox" / "deliveries" / "d_1_001" / f".delivery.json.9.{'cd' * 8}.tmp",
    ]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half a write")
    planted = _plant(fm.dir / ".config.json.4245.tmp", outside / "target")
    keep = [fm.dir / "notes.tmp", fm.dir / ".prd.json.tmp", fm.dir / f".x.{os.getpid()}.tmp"]
    for path in keep:
        path.write_bytes(b"not a stale temp file of another process")
    removed = fm.init()
    assert sorted(removed) == sorted([*stale, planted])
    assert not any(os.path.lexists(p) for p in [*stale, planted])
    assert all(p.exists() for p in keep)
    _untouched(outside)


def test_temp_files_are_removed_only_when_their_writer_is_gone(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    dead = state / f".registry.json.{_dead_pid()}.tmp"
    alive = state / f".registry.json.{os.getppid()}.{'ef' * 8}.tmp"
    ours = state / f".registry.json.{os.getpid()}.{'ef' * 8}.tmp"
    for path in (dead, alive, ours):
        path.write_bytes(b"half")
    (state / "sub").mkdir()
    (state / "sub" / dead.name).write_bytes(b"half")
    assert atomic.remove_stale_temp_files(state) == [dead]
    assert alive.exists() and ours.exists() and (state / "sub" / dead.name).exists()


def test_many_killed_writes_leave_nothing_after_a_start(repo: Path) -> None:
    """A writer killed with SIGKILL between temp file and rename, twelve times over."""
    fm = FileManager(repo)
    fm.init()
    # twelve writer processes, forked by one interpreter (not twelve imports of the store)
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from pokeralph_core import atomic\n"
        "def die(*a, **k): os.kill(os.getpid(), 9)\n"
        "atomic.os.replace = die\n"
        "for _ in range(12):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        atomic.atomic_write(Path(sys.argv[1]), b'{}')\n"
        "        os._exit(0)\n"
        "    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fm.prd_path)], check=True, capture_output=True, text=True
    )
    assert proc.stdout.split() == ["-9"] * 12, proc.stderr
    assert len([p for p in fm.dir.iterdir() if p.name.endswith(".tmp")]) == 12
    fm.init()
    assert [p for p in fm.dir.iterdir() if p.name.endswith(".tmp")] == []


# -- the module itself


def test_guarded_paths_start_at_the_last_pokeralph_folder(tmp_path: Path) -> None:
    root = tmp_path / ".pokeralph" / "repo"
    assert safefs.guarded(root / ".pokeralph" / "prd.json") == (root, (".pokeralph", "prd.json"))
    assert safefs.guarded(tmp_path / "state" / "registry.json") is None
    with pytest.raises(StorageError):
        safefs.guarded(root / ".pokeralph" / ".." / "x")


def test_paths_outside_pokeralph_still_follow_links(tmp_path: Path) -> None:
    """The user's own config may live in a dotfiles checkout, linked into place."""
    dotfiles = tmp_path / "dotfiles" / "config.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mode": "yolo"}')
    link = _plant(tmp_path / "config" / "config.json", dotfiles)
    assert documents.read_json(link) == {"mode": "yolo"}


def test_walk_never_enters_a_link(repo: Path, outside: Path) -> None:
    (outside / "deep").mkdir()
    (outside / "deep" / ".x.1.tmp").write_bytes(b"outside")
    fm = FileManager(repo)
    fm.init()
    _plant(fm.dir / "battles" / "001-a", outside)
    seen = {e.path: e.kind for e in safefs.walk(fm.dir)}
    assert seen[fm.dir / "battles" / "001-a"] == "link"
    assert not any(str(outside) in str(p) or "deep" in p.parts for p in seen)
    assert atomic.remove_stale_temp_files(fm.dir, recursive=True, exclusive=True) == []
    assert (outside / "deep" / ".x.1.tmp").exists()


def test_init_leaves_folders_it_does_not_own_alone(repo: Path, outside: Path) -> None:
    """A folder kept in .pokeralph/ by someone else (a worktree, say) may hold links and
    files named like our temp files: they are the repository's, not ours to judge."""
    fm = FileManager(repo)
    fm.init()
    other = fm.dir / "worktrees" / "w1"
    other.mkdir(parents=True)
    _plant(other / "docs", outside)
    (other / ".notes.4242.tmp").write_text("a user's file")
    assert fm.init() == []
    assert (other / "docs").is_symlink() and (other / ".notes.4242.tmp").exists()
