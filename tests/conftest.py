from __future__ import annotations

import atexit
import gc
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import tests.bytecode  # noqa: F401  # bytecode is written (before anything here imports)
from tests.helpers import DEEP_FUZZ, TEST_TMP, DaemonProcess, make_git_repo, short_tmpdir

# No test may leave a daemon behind by accident: autostart is opted out unless a test
# turns it back on for itself.
os.environ["POKERALPH_NO_AUTOSTART"] = "1"
# Every battle history body built from kept iteration dumps is compared with a full dump
# (pokeralphd.store.history_body): a record changed in place after it was saved fails.
os.environ["POKERALPH_CHECK_HISTORY_BODIES"] = "1"

# A shell starts a background job (`pytest ... &`) with SIGINT ignored, and every child
# inherits that: a `watch` the tests interrupt would never end. Ctrl-C acts as usual here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The fake agents start with ``#!/usr/bin/env python3``: let that find this interpreter
# first (a version manager's shim found on PATH instead costs ~0.1 s of CPU per start).
# A pyvenv.cfg goes beside the link: Python then starts as a venv with no packages (the
# fakes use the standard library only), not as the base interpreter with its own
# site-packages and their .pth hooks (~40 ms more a start here).
_PYTHON_DIR = short_tmpdir("prpy")
(_PYTHON_DIR / "python3").symlink_to(sys.executable)
if (Path(sys.prefix) / "pyvenv.cfg").is_file():
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", _PYTHON_DIR / "pyvenv.cfg")
os.environ["PATH"] = f"{_PYTHON_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
atexit.register(shutil.rmtree, _PYTHON_DIR, ignore_errors=True)


# Property tests run Hypothesis's default 100 examples; the nightly deep run 20 times that.
settings.register_profile("deep", max_examples=2000)
if DEEP_FUZZ:
    settings.load_profile("deep")


def pytest_configure(config: pytest.Config) -> None:
    """``tmp_path`` goes where the tests' other folders go (:data:`TEST_TMP`: memory
    where there is room), unless ``--basetemp`` says where: pytest's default is under
    /tmp, on disk here, where each of the daemon's durable writes (two fsyncs) took 0.57
    ms against 0.013 ms in memory. One folder per run (the workers' are inside it; runs
    at once do not share it), removed at the end."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="pytest-", dir=TEST_TMP)
        atexit.register(shutil.rmtree, config.option.basetemp, ignore_errors=True)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n logical``/``-n auto``: two workers more than this process may use CPUs. A good
    part of a worker's time waits (on sockets, a slow reader, a browser, real CLIs, an
    agent's gate); the extra workers fill it. On 2 cores, 2026-11-28, runs alternating:
    1,741 tests, 3 workers 58.2 and 55.6 s, 4 workers 58.1 and 54.7 s (three used 5-10 s
    less CPU for the same wall time); 1,682 tests earlier that day, 3 workers 74-79 s, 4
    workers 70.5-73.2 s. (On 2026-11-23, 1,156 tests:
    2 workers 47.5 s, 3 42.7 s, 4 46.9 s; the suite has since gained tests that mostly
    wait.) ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cpus or 1) + 2


# Modules whose tests run on one worker under xdist, by group: the browser's share a
# module-scoped browser (a run starts one Chromium and one dashboard daemon, not one per
# worker); the ACP SDK's client (~0.45 s of CPU to import) and Textual (~0.25 s) are
# imported by the worker that runs the tests that use them, not by each (every worker
# collects every module: those modules import them lazily). The tests that read the
# package's source parse each file once on one worker (tests.helpers.source_nodes), not
# once on each. The rest are spread one test at a time, as ``--dist load`` spreads them.
ONE_WORKER = {
    "tests/web/test_browser.py": "browser",
    "tests/acp/test_acp_agent.py": "acp",
    "tests/tui/test_dashboard.py": "tui",
    "tests/tui/test_parts.py": "tui",
    "tests/unit/test_architecture.py": "source",
    "tests/unit/test_contract.py": "source",
    "tests/unit/test_result_paths.py": "source",
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":
        return None  # an explicit --dist wins
    from xdist.scheduler import LoadScopeScheduling

    class KeepModulesTogether(LoadScopeScheduling):  # type: ignore[misc]  # xdist: untyped
        def _split_scope(self, nodeid: str) -> str:
            return ONE_WORKER.get(nodeid.split("::", 1)[0], nodeid)

    return KeepModulesTogether(config, log)


# The longest tests, started first under xdist (as ``-n logical`` runs):
# a worker that takes one of them near the end of a run leaves the others idle while it
# finishes. Most are real agent CLIs (CPU-bound Node and Bun programs: OpenCode's battles
# are the longest); the slow reader sleeps on purpose for over 5 s (it must outlast the
# old fixed 5 s window), which costs no CPU when it overlaps with the rest. Patterns
# (fnmatch, on the node id) in the order they start; the rest keep their order, but for
# WAITING (below).
SLOW_FIRST = (
    "tests/real/test_real_acp.py::*[[]opencode]",
    "tests/real/test_real_acp.py::*",
    "tests/integration/test_hardening_wire.py::test_a_slow_reader_gets_a_whole_large_reply",
    "tests/tui/test_dashboard.py::*",
    "tests/real/*",
    "tests/acp/*",
)
# Tests that mostly wait (a reader 8 ms between reads, webhook retries, a proxy's
# timeouts), a second or two each: late in the files' order they were a run's last seconds
# alone; started together they left both CPUs idle for 3 s. They are spread evenly among
# the integration tests, whose battles keep the CPUs busy meanwhile.
WAITING = (
    "tests/editors/test_nvim.py::*",
    "tests/notify/test_notify_live.py::*",
    "tests/unit/test_wire_limits.py::test_a_slow_reader_gets_the_whole_frame",
    "tests/unit/test_sandbox_seatbelt_run.py::*",
    "tests/unit/test_sandbox_proxy.py::*",
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is alive once the tests are collected (the modules, their items, the libraries
    they imported) lives as long as the session: the cyclic garbage collector stops
    walking it at every full collection (``gc.freeze``). That walk was ~10% of a pytest
    process's CPU (tests/cli, tests/tui and tests/acp: 16.3 s of CPU, 14.5 s frozen).

    Frozen, the collector is set as the daemon sets its own (:func:`pokeralphd.heap.settle`):
    a youngest generation of 10,000 objects, not 700. The in-process daemons and the tests
    allocate fast and free most of it at once: at Python's default a worker collected
    1,100-3,100 times a run, about half of the CPU spent collecting (4.0 s against 2.3 s,
    the workers together, in one hour). Wider older generations (20 and 50, not 10 and 10)
    made no difference measured."""
    from pokeralphd import heap  # here: tests.bytecode comes before the package's imports

    gc.collect()
    heap.settle()


def start_rank(item: pytest.Item) -> int:
    """The place of ``item``'s pattern in :data:`SLOW_FIRST` (its length: none)."""
    return next(
        (i for i, pattern in enumerate(SLOW_FIRST) if fnmatch(item.nodeid, pattern)),
        len(SLOW_FIRST),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order (the controller schedules a worker's)
    items[:] = start_order(items)


def start_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order the tests start in under xdist: :data:`SLOW_FIRST` first (stable: the
    order within each pattern is kept), then the rest, the :data:`WAITING` ones among them
    taken out and put back at even intervals among the integration tests."""
    ranks = {id(item): start_rank(item) for item in items}
    items = sorted(items, key=lambda item: ranks[id(item)])
    unranked = len(SLOW_FIRST)
    waiting = [
        item
        for item in items
        if ranks[id(item)] == unranked and any(fnmatch(item.nodeid, p) for p in WAITING)
    ]
    if not waiting:
        return items
    held = {id(item) for item in waiting}
    others = [item for item in items if id(item) not in held]
    among = [
        n
        for n, item in enumerate(others)
        if ranks[id(item)] == unranked and item.nodeid.startswith("tests/integration/")
    ]
    if not among:
        return others + waiting
    step = max(1, len(among) // len(waiting))
    for n, item in reversed(list(enumerate(waiting))):  # from the end: earlier places hold
        others.insert(among[min(n * step, len(among) - 1)], item)
    return others


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home: Path) -> Iterator[DaemonProcess]:
    """A real daemon on a real socket, in this process (see ``ThreadedDaemon``); tests
    that need a process boundary start a ``DaemonProcess`` themselves."""
    from tests.inproc import ThreadedDaemon

    proc = ThreadedDaemon(home).start()
    yield proc
    proc.stop()


@pytest.fixture
def repo(home: Path) -> Path:
    return make_git_repo(home / "repo")
