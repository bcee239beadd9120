"""Bytecode is written for the test session even under ``PYTHONDONTWRITEBYTECODE``.

Daemons, agents and the CLI started by the tests import the package again; where bytecode
may not be written (``PYTHONDONTWRITEBYTECODE``, as on CI, and a fresh clone) each compiles
it from source: ~1.2 s of CPU per daemon. pytest also rewrites the asserts of its plugins'
modules (anyio, Hypothesis, xdist, …: ~120 modules) and keeps the result only where
bytecode may be written: ~0.6 s of CPU in every pytest process, the xdist workers
included, redone at each run. ``-p tests.bytecode`` comes first in ``addopts``
(pyproject.toml), so this runs before those plugins load; ``tests/conftest.py`` imports it
too, for a run that replaces ``addopts``. The session writes the usual (ignored)
``__pycache__``.
"""

from __future__ import annotations

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
