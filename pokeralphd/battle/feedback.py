"""FeedbackRunner: which loops a repository has, and running them.

Detection looks at the repository's own files (first match wins for a loop name, in this
order): package.json scripts (npm, or bun/pnpm/yarn by lockfile), Python (pytest,
ruff, mypy when configured), Makefile targets, Cargo, Go. Configured
``feedbackCommands`` override detection. Each loop runs through ``/bin/sh -c`` in its own
process group with a timeout; its output is kept trimmed to the tail.

A loop runs code the agent may have written (a ``conftest.py``, a Makefile target, a
``package.json`` script), so it is a run of the battle's like the agent's own: tracked
with the battle's scope for its whole life (its connections to the daemon are an
agent's), with a token of its own, and its group and token swept when it ends.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import tomllib
import uuid
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.childlines import iter_lines
from pokeralphd.domain.models import FeedbackResult
from pokeralphd.proc import (
    AgentScope,
    ProcessOwner,
    after_exit,
    end_tree,
    reap,
    spawn,
    tracked,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralphd.proc import TrackedRun, Wrap

KEEP_BYTES = 64 * 1024
OUTPUT_CHARS = 4000
STANDARD = ("test", "lint", "typecheck", "build", "check")


def _node(repo: Path) -> dict[str, str]:
    try:
        scripts = json.loads((repo / "package.json").read_text()).get("scripts") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    runner = "npm run"
    for lock, tool in (
        ("bun.lockb", "bun run"),
        ("bun.lock", "bun run"),
        ("pnpm-lock.yaml", "pnpm run"),
        ("yarn.lock", "yarn run"),
    ):
        if (repo / lock).exists():
            runner = tool
            break
    return {
        name: f"{runner} {name}"
        for name in STANDARD
        if isinstance(scripts, dict) and name in scripts
    }


def _python(repo: Path) -> dict[str, str]:
    pyproject: dict[str, Any] = {}
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    tool = pyproject.get("tool", {}) if isinstance(pyproject.get("tool"), dict) else {}
    setup_cfg = ""
    with contextlib.suppress(OSError):
        setup_cfg = (repo / "setup.cfg").read_text()
    out: dict[str, str] = {}
    has_python = bool(pyproject) or (repo / "setup.py").exists() or any(repo.glob("*.py"))
    if not has_python:
        return out
    pytest_configured = (
        "pytest" in tool
        or (repo / "pytest.ini").exists()
        or "[tool:pytest]" in setup_cfg
        or (repo / "conftest.py").exists()
    )
    if pytest_configured or (repo / "tests").is_dir():
        out["test"] = "python3 -m pytest -q"
    elif any(repo.glob("test_*.py")) or any(repo.glob("*_test.py")):
        out["test"] = "python3 -m unittest -q"
    if "ruff" in tool or (repo / "ruff.toml").exists() or (repo / ".ruff.toml").exists():
        out["lint"] = "ruff check ."
    if "mypy" in tool or (repo / "mypy.ini").exists() or "[mypy]" in setup_cfg:
        out["typecheck"] = "mypy ."
    return out


def _make(repo: Path) -> dict[str, str]:
    try:
        text = (repo / "Makefile").read_text()
    except OSError:
        return {}
    targets = set(re.findall(r"^([A-Za-z0-9_-]+)\s*:(?!=)", text, re.MULTILINE))
    return {name: f"make {name}" for name in STANDARD if name in targets}


def _cargo(repo: Path) -> dict[str, str]:
    if not (repo / "Cargo.toml").exists():
        return {}
    return {"test": "cargo test", "lint": "cargo clippy -- -D warnings", "typecheck": "cargo check"}


def _go(repo: Path) -> dict[str, str]:
    if not (repo / "go.mod").exists():
        return {}
    return {"test": "go test ./...", "lint": "go vet ./...", "typecheck": "go build ./..."}


def detect_loops(repo: Path) -> dict[str, str]:
    """Loop name -> shell command, from the repository's own files."""
    found: dict[str, str] = {}
    for source in (_node, _python, _make, _cargo, _go):
        for name, command in source(repo).items():
            found.setdefault(name, command)
    return found


def resolve_loops(
    names: list[str], detected: dict[str, str], overrides: dict[str, str]
) -> dict[str, str | None]:
    return {name: overrides.get(name) or detected.get(name) for name in names}


def _trim(data: bytes, dropped: int) -> str:
    text = data.decode("utf-8", errors="replace")
    cut = dropped
    if len(text) > OUTPUT_CHARS:
        cut += len(text.encode()) - len(text[-OUTPUT_CHARS:].encode())
        text = text[-OUTPUT_CHARS:]
    return (f"[… {cut} bytes trimmed]\n" if cut else "") + text


async def run_loop(
    name: str,
    command: str | None,
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    owner: ProcessOwner | None = None,
    scope: AgentScope | None = None,
    confine: Wrap | None = None,
) -> FeedbackResult:
    """Run one loop; passed is exit status 0. Never raises for the command's own failure.

    With an owner and a scope (the battle's), the loop is one of the owner's runs from
    before it starts until its last process is gone. ``confine``: its sandbox."""
    token = uuid.uuid4().hex
    with tracked(owner, scope, token) as run:
        return await _run_loop(name, command, cwd, timeout, env, owner, token, run, confine)


async def _run_loop(
    name: str,
    command: str | None,
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None,
    owner: ProcessOwner | None,
    token: str,
    run: TrackedRun | None,
    confine: Wrap | None = None,
) -> FeedbackResult:
    if command is None:
        return FeedbackResult(
            passed=False,
            output=f"no command for loop '{name}': set feedbackCommands.{name} in the config "
            f'(`pokeralphctl config set feedbackCommands.{name} "CMD"`)',
        )
    started = time.monotonic()
    buf = bytearray()
    dropped = 0
    process = await spawn(
        ["/bin/sh", "-c", command],
        cwd=str(cwd),
        env=env or {},
        owner=owner,
        token=token,
        stderr=subprocess.STDOUT,
        confine=confine,
    )
    if run is not None and owner is not None:
        owner.started_run(run, process.pid)

    async def collect() -> None:
        nonlocal dropped
        assert process.stdout is not None
        async for line in iter_lines(process.stdout):
            buf.extend(line + b"\n")
            if len(buf) > KEEP_BYTES:
                dropped += len(buf) - KEEP_BYTES
                del buf[: len(buf) - KEEP_BYTES]

    try:
        with anyio.move_on_after(timeout) as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(collect)
                await process.wait()
        timed_out = deadline.cancelled_caught
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(end_tree, process.pid, token, 2.0)
            await reap(process)
        raise
    if timed_out:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(end_tree, process.pid, token, 2.0)
            await reap(process)
        output = (
            _trim(bytes(buf), dropped) + f"\n[timed out after {timeout:g} s; the loop was stopped]"
        )
        return FeedbackResult(
            passed=False,
            output=output,
            duration=int((time.monotonic() - started) * 1000),
            command=command,
            exit_code=None,
        )
    await after_exit(process.pid, token, confine)  # leftovers of a finished loop
    await reap(process)
    return FeedbackResult(
        passed=process.returncode == 0,
        output=_trim(bytes(buf), dropped),
        duration=int((time.monotonic() - started) * 1000),
        command=command,
        exit_code=process.returncode,
    )
