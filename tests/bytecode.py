"""Bytecode is written for the test session even under ``PYTHONDONTWRITEBYTECODE``, and
written once, before the xdist workers start.

Daemons, agents and the CLI started by the tests import the package again; where bytecode
may not be written (``PYTHONDONTWRITEBYTECODE``, as on CI, and a fresh clone) each compiles
it from source: ~1.2 s of CPU per daemon. pytest also rewrites the asserts of its plugins'
modules (anyio, Hypothesis, xdist, …: ~120 modules) and keeps the result only where
bytecode may be written: ~0.6 s of CPU in every pytest process, the xdist workers
included, redone at each run. ``-p tests.bytecode`` comes first in ``addopts``
(pyproject.toml), so this runs before those plugins load; ``tests/conftest.py`` imports it
too, for a run that replaces ``addopts``. The session writes the usual (ignored)
``__pycache__``.

On a fresh clone nothing is compiled yet, and every xdist worker rewrites the asserts of
every test module as it collects them, all at once: ~2.6 s of CPU each, a cold run 7 s
longer than a warm one on 2 cores. So the controller of a distributed run first writes
what is missing (the test modules as pytest rewrites them, the packages as Python compiles
them), on as many processes as there are CPUs, and the workers find it written. When
nothing is missing it only reads the files' headers.
"""

from __future__ import annotations

import compileall
import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pokeralph_core", "pokeralphd", "pokeralphctl", "pokeralph_agent", "pokeralph_acp")
# As pyproject's norecursedirs: not collected, so never rewritten (their modules are
# compiled as the other helpers are).
NOT_COLLECTED = ("bench", "fakes")

_config: pytest.Config | None = None  # the controller's, for the forked writers


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before xdist starts its workers (its own hook runs last): write what they would
    each write again."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession"):
        return  # one process, or a worker: it writes what it imports, once
    rewritten = _stale_test_modules(config)
    compiled = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    compiled += sorted(p for p in (ROOT / "tests").rglob("*.py") if not _is_rewritten(p))
    _write(config, rewritten, compiled)


def _test_files(keep: Callable[[Path], bool]) -> list[Path]:
    tests = ROOT / "tests"
    return sorted(
        path
        for path in tests.rglob("*.py")
        if path.relative_to(tests).parts[0] not in NOT_COLLECTED and keep(path)
    )


def _is_rewritten(path: Path) -> bool:
    """What pytest rewrites as it imports: the test modules and the conftest files."""
    return path.name == "conftest.py" or (path.name.startswith("test_") and path.suffix == ".py")


def _stale_test_modules(config: pytest.Config) -> list[Path]:
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, assertstate_key, get_cache_dir

    if assertstate_key not in config.stash:
        return []  # --assert=plain: nothing is rewritten
    trace = config.stash[assertstate_key].trace
    return [
        path
        for path in _test_files(_is_rewritten)
        if _read_pyc(path, get_cache_dir(path) / (path.name[:-3] + PYC_TAIL), trace) is None
    ]


def _write(config: pytest.Config, rewritten: list[Path], compiled: list[Path]) -> None:
    global _config
    jobs = [(str(p), True) for p in rewritten] + [(str(p), False) for p in compiled]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not rewritten or (cpus or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for job in jobs:
            _write_one(job, config)
        return
    _config = config
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=cpus, mp_context=context) as pool:
            list(pool.map(_write_one, jobs, chunksize=8))
    finally:
        _config = None


def _write_one(job: tuple[str, bool], config: pytest.Config | None = None) -> None:
    path, rewrite = Path(job[0]), job[1]
    if not rewrite:
        compileall.compile_file(path, quiet=2)
        return
    from _pytest.assertion.rewrite import (
        PYC_TAIL,
        _rewrite_test,
        _write_pyc,
        assertstate_key,
        get_cache_dir,
    )

    config = config or _config
    assert config is not None
    cache_dir = get_cache_dir(path)
    try:
        cache_dir.mkdir(exist_ok=True)
        source_hash, code = _rewrite_test(path, config)
    except (OSError, SyntaxError, ValueError):
        return  # the worker that imports it meets the error again, and reports it as usual
    _write_pyc(
        config.stash[assertstate_key], code, source_hash, cache_dir / (path.name[:-3] + PYC_TAIL)
    )
