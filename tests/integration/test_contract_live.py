"""The contract against a live daemon: rpc.discover is shared/openrpc.json, and the
standard-library example client in shared/examples works as its README says."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO_ROOT, DaemonProcess


def test_discover_is_the_shared_document(daemon: DaemonProcess) -> None:
    shared = json.loads((REPO_ROOT / "shared" / "openrpc.json").read_text())
    assert daemon.call("rpc.discover") == shared


def test_the_example_python_client(daemon: DaemonProcess, repo: object) -> None:
    example = REPO_ROOT / "shared" / "examples" / "watch.py"
    once = subprocess.run(
        [sys.executable, str(example), "--once"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert once.returncode == 0, once.stderr
    assert json.loads(once.stdout)["pid"] == daemon.pid
    watcher = subprocess.Popen(
        [sys.executable, str(example)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None and watcher.stderr is not None
        assert watcher.stderr.readline().startswith("subscribed at seq")
        daemon.call("repo.register", {"path": str(repo)})
        line = watcher.stdout.readline()
        assert "repo_registered" in line
    finally:
        watcher.terminate()
        watcher.wait(10)
        for pipe in (watcher.stdout, watcher.stderr):
            if pipe:
                pipe.close()
