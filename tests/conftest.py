from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import DaemonProcess, make_git_repo, short_tmpdir

# No test may leave a daemon behind by accident: autostart is opted out unless a test
# turns it back on for itself.
os.environ["POKERALPH_NO_AUTOSTART"] = "1"


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
