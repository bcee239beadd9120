"""Run the real Claude Code CLI against the scripted Messages API (tests/fakes/messages_api.py).

The CLI is the one ``tests/real/install.sh`` puts under ``.tools/`` (or the path in
``POKERALPH_REAL_CLAUDE``); without it every test here is skipped. It only ever talks to
127.0.0.1: ``ANTHROPIC_BASE_URL`` points at the fake, nonessential traffic, telemetry and
the autoupdater are off, and ``HOME`` is a temporary folder.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.messages_api import MessagesAPI

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CLAUDE = ROOT / ".tools" / "node_modules" / ".bin" / "claude"

Decide = Callable[[dict[str, Any]], dict[str, Any]]


def claude_path() -> Path:
    return Path(os.environ.get("POKERALPH_REAL_CLAUDE") or DEFAULT_CLAUDE)


@pytest.fixture
def claude_bin() -> Path:
    path = claude_path()
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.skip(f"real Claude Code CLI not installed at {path} (run tests/real/install.sh)")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def claude_home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def claude_env(api: MessagesAPI, home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "CLAUDECODE"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="sk-ant-api03-test-0000",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
    )
    return env


def user_message(text: str) -> dict[str, Any]:
    """The stream-json user message that carries the prompt on stdin."""
    return {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "session_id": "",
    }


def allow(request: dict[str, Any]) -> dict[str, Any]:
    return {"behavior": "allow", "updatedInput": request["input"]}


def deny(message: str) -> Decide:
    def decide(request: dict[str, Any]) -> dict[str, Any]:
        return {"behavior": "deny", "message": message}

    return decide


@dataclass
class Run:
    returncode: int
    events: list[dict[str, Any]]
    sent: list[dict[str, Any]]
    stderr: str
    control_requests: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    @property
    def result(self) -> dict[str, Any]:
        results = self.of_type("result")
        assert results, f"no result event; stderr={self.stderr!r}"
        return results[-1]


def drive(
    claude: Path,
    api: MessagesAPI,
    cwd: Path,
    home: Path,
    prompt: str,
    decide: Decide = allow,
    *,
    extra_args: tuple[str, ...] = (),
    timeout: float = 60.0,
) -> Run:
    """Our own small control-protocol host: run the CLI with stream-json in and out and
    ``--permission-prompt-tool stdio``, send the prompt as one user message, keep stdin
    open, answer every ``can_use_tool`` control request with ``decide``, close stdin once
    the ``result`` event arrives."""
    argv = [
        str(claude),
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-prompt-tool",
        "stdio",
        *extra_args,
    ]
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=claude_env(api, home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    lines: queue.Queue[str | None] = queue.Queue()
    err_chunks: list[str] = []

    def pump() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    def pump_err() -> None:
        err_chunks.append(stderr.read())

    threads = [threading.Thread(target=pump, daemon=True), threading.Thread(target=pump_err)]
    for t in threads:
        t.start()
    sent: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    control: list[dict[str, Any]] = []

    def send(obj: dict[str, Any]) -> None:
        sent.append(obj)
        stdin.write(json.dumps(obj) + "\n")
        stdin.flush()

    deadline = time.monotonic() + timeout
    try:
        send(user_message(prompt))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"CLI still running after {timeout}s; events={events!r}")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                break
            if not line.strip():
                continue
            event = json.loads(line)
            events.append(event)
            if event.get("type") == "control_request":
                control.append(event)
                request = event["request"]
                if request.get("subtype") == "can_use_tool":
                    response = {
                        "subtype": "success",
                        "request_id": event["request_id"],
                        "response": decide(request),
                    }
                else:
                    response = {
                        "subtype": "error",
                        "request_id": event["request_id"],
                        "error": f"unsupported {request.get('subtype')}",
                    }
                send({"type": "control_response", "response": response})
            elif event.get("type") == "result" and not stdin.closed:
                stdin.close()
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if not stdin.closed:
            stdin.close()
        for t in threads:
            t.join(timeout=5)
        stdout.close()
        stderr.close()
    return Run(code, events, sent, "".join(err_chunks), control)
