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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parents[1]

_config: pytest.Config | None = None  # the controller's, for the forked writers


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before xdist starts its workers (its own hook runs last): write what they would
    each write again."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession"):
        return  # one process, or a worker: it writes what it imports, once
    from _pytest.assertion.rewrite import assertstate_key

    tests = sorted((ROOT / "tests").rglob("*.py"))
    rewritten = {path for path in tests if _is_rewritten(config, path)}
    rewriting = assertstate_key in config.stash  # not under --assert=plain
    stale = [path for path in sorted(rewritten) if rewriting and not _fresh(config, path)]
    compiled = [path for package in _packages() for path in sorted((ROOT / package).rglob("*.py"))]
    compiled += [path for path in tests if path not in rewritten]
    _write(config, stale, compiled)


def _packages() -> list[str]:
    """The project's packages, as pyproject.toml tells setuptools to find them."""
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as file:
        found = tomllib.load(file)["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.rstrip("*") for pattern in found]


def _is_rewritten(config: pytest.Config, path: Path) -> bool:
    """Whether pytest rewrites ``path`` as it imports it: a conftest file, or a module it
    collects (named as ``python_files`` says, in no folder ``norecursedirs`` skips)."""
    from _pytest.pathlib import fnmatch_ex

    if path.name == "conftest.py":
        return True
    if not any(fnmatch_ex(pattern, path) for pattern in config.getini("python_files")):
        return False
    skipped = config.getini("norecursedirs")
    folders = [folder for folder in path.parents if folder.is_relative_to(ROOT / "tests")]
    return not any(fnmatch_ex(pattern, folder) for pattern in skipped for folder in folders)


def _rewritten_pyc(path: Path) -> Path:
    from _pytest.assertion.rewrite import PYC_TAIL, get_cache_dir

    return get_cache_dir(path) / (path.name[:-3] + PYC_TAIL)


def _fresh(config: pytest.Config, path: Path) -> bool:
    """Whether the code pytest kept for ``path`` is there and fresh."""
    from _pytest.assertion.rewrite import _read_pyc, assertstate_key

    return _read_pyc(path, _rewritten_pyc(path), config.stash[assertstate_key].trace) is not None


def _write(config: pytest.Config, rewritten: list[Path], compiled: list[Path]) -> None:
    """Rewrite and compile, on one forked process per CPU when there is rewriting to do
    (else checking what is there is all, done here)."""
    global _config
    jobs = [(str(p), True) for p in rewritten] + [(str(p), False) for p in compiled]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    _config = config
    try:
        if (
            not rewritten
            or (cpus or 1) < 2
            or "fork" not in multiprocessing.get_all_start_methods()
        ):
            for job in jobs:
                _write_one(job)
            return
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=cpus, mp_context=context) as pool:
            list(pool.map(_write_one, jobs, chunksize=8))
    finally:
        _config = None


def _write_one(job: tuple[str, bool]) -> None:
    path, rewrite = Path(job[0]), job[1]
    if not rewrite:
        compileall.compile_file(path, quiet=2)
        return
    from _pytest.assertion.rewrite import _rewrite_test, _write_pyc, assertstate_key, try_makedirs

    config = _config
    assert config is not None
    pyc = _rewritten_pyc(path)
    try:
        source_hash, code = _rewrite_test(path, config)
    except (OSError, SyntaxError, ValueError):
        return  # the worker that imports it meets the error again, and reports it as usual
    if try_makedirs(pyc.parent):
        _write_pyc(config.stash[assertstate_key], code, source_hash, pyc)
