"""The real Codex CLI (``codex exec --json``) against the scripted Responses API.

The CLI is the one ``tests/real/install.sh`` puts under ``.tools/`` (or the path in
``POKERALPH_REAL_CODEX``); without it every test here is skipped. Its ``CODEX_HOME`` is a
temporary folder whose ``config.toml`` names one model provider, the fake on 127.0.0.1
(``wire_api = "responses"``, the key from ``env_key``), with the CLI's own retries off so
an error reaches us at once. What these prove, each with our own argv
(``CodexBackend.argv``): a shell command writes a file in ``workspace-write`` and the
JSONL parses (ids, usage counted once, a resumed thread counted once); the CLI contacts
no host but the model endpoint (a refusing proxy, and strace where there is one); and
through a real daemon, a YOLO battle completes, and a 429 or a 500 pauses the battle
without counting the iteration.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import socketserver
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents.base import (
    AgentEvent,
    AgentNotice,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentToolResult,
    AgentToolUse,
)
from pokeralphd.agents.codex import QUIET_OVERRIDES, CodexBackend
from pokeralphd.domain.models import Usage
from tests.fakes.responses_api import (
    RATE_LIMITED,
    SERVER_ERROR,
    ApiError,
    Call,
    ResponsesAPI,
    Say,
    Turn,
    provider_toml,
)
from tests.fakes.responses_api import Usage as ApiUsage
from tests.helpers import make_git_repo
from tests.inproc import InProcDaemon, running_daemon, setup_task

ROOT = Path(__file__).resolve().parents[2]
E = TypeVar("E")
DEFAULT_CODEX = ROOT / ".tools" / "node_modules" / ".bin" / "codex"
DONE = Say("All done.\n\n<promise>COMPLETE</promise>")
WRITE = Call("exec_command", {"cmd": "printf hi > codex.txt && cat codex.txt"}, text="Writing.")


@pytest.fixture
def codex_bin() -> Path:
    path = Path(os.environ.get("POKERALPH_REAL_CODEX") or DEFAULT_CODEX)
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.skip(f"real Codex CLI not installed at {path} (run tests/real/install.sh)")
    return path


@pytest.fixture
def repo(home: Path) -> Path:
    return make_git_repo(home / "repo")


class RefusingProxy:
    """An HTTP proxy on 127.0.0.1 that refuses everything and records what was asked
    (``CONNECT host:443`` for HTTPS, the absolute URL for plain HTTP)."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                first = self.rfile.readline(8192).decode("latin-1").strip()
                while self.rfile.readline(8192).strip():
                    pass
                proxy.asked.append(first)
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def hosts(self) -> set[str]:
        """The host names asked for, without ports."""
        targets = (a.split()[1] for a in self.asked if len(a.split()) > 1)
        return {t.split("//")[-1].split("/")[0].rsplit(":", 1)[0] for t in targets}

    def env(self) -> dict[str, str]:
        """Every host through this proxy but the loopback the fake API listens on."""
        names = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
        env = {n: self.url for n in names} | {n.lower(): self.url for n in names}
        return env | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    def __enter__(self) -> RefusingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# Where the tests' CODEX_HOME folders go. Not the tests' own temporary folder: where
# bubblewrap is installed, ``--sandbox workspace-write`` runs each command through
# bwrap and Codex's ``codex-linux-sandbox`` helper, a link Codex makes under
# ``CODEX_HOME/tmp/arg0-linux``. Codex refuses to make it under the temporary folder
# ("Refusing to create helper binaries under temporary dir"), and under /dev/shm (the
# tests' folder where it has room) its own bwrap's fresh /dev hides it: either way every
# command fails with "bwrap: execvp …codex-linux-sandbox: No such file or directory"
# and the run still ends "successfully" (docs/sandbox.md). A real CODEX_HOME is
# ~/.codex, neither of these; /var/tmp stands in for it.
CODEX_HOME_ROOT = os.environ.get("POKERALPH_TEST_CODEX_HOMES", "/var/tmp")


def codex_home_dir() -> Path:
    """A fresh CODEX_HOME under :data:`CODEX_HOME_ROOT`, removed when the tests end."""
    path = Path(tempfile.mkdtemp(prefix="pokeralph-codex-", dir=CODEX_HOME_ROOT))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def codex_env(api: ResponsesAPI, home: Path, **extra: str) -> dict[str, str]:
    """HOME under ``home`` and CODEX_HOME (with the provider's config.toml) under
    :data:`CODEX_HOME_ROOT`; the key in ``OPENAI_API_KEY``; nothing of the caller's own
    OpenAI/Codex settings or proxies."""
    codex_home = codex_home_dir()
    (codex_home / "config.toml").write_text(provider_toml(api))
    skip = ("OPENAI_", "CODEX_")
    proxies = {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"}
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(skip) and k.upper() not in proxies
    }
    env.update(
        HOME=str(home / "h"),
        CODEX_HOME=str(codex_home),
        OPENAI_API_KEY="sk-test-0000",
        **extra,
    )
    (home / "h").mkdir(exist_ok=True)
    return env


@dataclass
class Run:
    returncode: int
    lines: list[dict[str, Any]]
    events: list[AgentEvent]
    stderr: str

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def result(self) -> AgentResult:
        results = self.of(AgentResult)
        assert results, f"no result; stderr={self.stderr[-2000:]!r} lines={self.lines!r}"
        return results[-1]


def our_argv(codex: Path, mode: str = "execute", resume: str | None = None) -> list[str]:
    request = AgentRequest(
        prompt="Write codex.txt",
        cwd=Path("."),
        mode="plan" if mode == "plan" else "execute",
        config=AgentConfig(backend="codex", command=str(codex)),
        resume_session=resume,
    )
    return CodexBackend().argv(request)


def run_codex(
    argv: list[str], cwd: Path, env: dict[str, str], *, wrap: tuple[str, ...] = ()
) -> Run:
    """Run the CLI as the daemon does (prompt on stdin) and parse stdout with a fresh
    backend given the same argv (a resume is known to it)."""
    backend = CodexBackend()
    if "resume" in argv:
        backend.argv(
            AgentRequest(
                prompt="-",
                cwd=cwd,
                mode="execute",
                config=AgentConfig(backend="codex"),
                resume_session=argv[argv.index("resume") + 1],
            )
        )
    proc = subprocess.run(
        [*wrap, *argv],
        cwd=cwd,
        env=env,
        input=b"Write codex.txt",
        capture_output=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(raw) for raw in proc.stdout.splitlines() if raw.strip()]
    events = [e for raw in proc.stdout.splitlines() if raw.strip() for e in backend.parse_line(raw)]
    return Run(proc.returncode, lines, events, proc.stderr.decode("utf-8", "replace"))


def test_a_shell_command_writes_a_file_and_the_events_parse(
    codex_bin: Path, home: Path, repo: Path
) -> None:
    write = Call(WRITE.name, WRITE.arguments, WRITE.text, usage=ApiUsage(1200, 1000, 40, 16))
    script: list[Turn] = [
        write,
        Say("Done. <promise>COMPLETE</promise>", ApiUsage(2000, 1500, 30, 8)),
        Say("Again.", ApiUsage(3000, 2500, 5, 1)),
    ]
    with ResponsesAPI(script) as api:
        env = codex_env(api, home)
        run = run_codex(our_argv(codex_bin), repo, env)
        assert run.returncode == 0, run.stderr[-2000:]
        assert (repo / "codex.txt").read_text() == "hi"
        [started] = run.of(AgentStarted)
        thread = started.session_id
        assert thread and re.fullmatch(r"[0-9a-f-]{36}", thread)
        [use] = run.of(AgentToolUse)
        [done] = run.of(AgentToolResult)
        assert use.name == "shell" and "printf hi > codex.txt" in use.summary
        assert use.id and use.id.startswith("item_") and done.tool_use_id == use.id
        assert done.text == "hi" and not done.is_error
        # The unknown model's metadata warning is a notice, not an error.
        assert any("Model metadata" in n.text for n in run.of(AgentNotice))
        result = run.result
        assert not result.is_error and result.session_id == thread
        assert result.text == "Done. <promise>COMPLETE</promise>"
        # OpenAI's input includes the cached tokens: 3200 in, 2500 of them cached.
        assert result.usage == Usage(
            input_tokens=700,
            output_tokens=70,
            cache_read_input_tokens=2500,
            reasoning_output_tokens=24,
        )
        # What went over the wire: our overrides took the web search tool away, and
        # the command's output went back to the model under the call's id.
        first = api.response_requests()[0]
        assert "exec_command" in first.tool_names() and "web_search" not in first.tool_names()
        [output] = api.function_outputs()
        assert output["call_id"] == write.call_id and "hi" in output["output"]

        # A resumed thread: turn.completed gives the thread's running total; we count
        # only this run's response.
        again = run_codex(our_argv(codex_bin, resume=thread), repo, env)
        assert again.returncode == 0, again.stderr[-2000:]
        assert again.result.session_id == thread and again.result.text == "Again."
        assert again.result.usage == Usage(
            input_tokens=500,
            output_tokens=5,
            cache_read_input_tokens=2500,
            reasoning_output_tokens=1,
        )
        assert [line["usage"]["input_tokens"] for line in again.lines if "usage" in line] == [6200]


def _without_quiet(argv: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if arg in QUIET_OVERRIDES and out and out[-1] == "-c":
            out.pop()
        else:
            out.append(arg)
    return out


def test_the_cli_talks_to_the_model_endpoint_only(codex_bin: Path, home: Path, repo: Path) -> None:
    """Every host but the fake goes through a proxy that refuses and records. Without
    our overrides the CLI reaches for the plugin marketplace and the analytics/metrics
    hosts on every run; with them, for nothing but the fake."""
    with ResponsesAPI([WRITE, DONE, WRITE, DONE]) as api, RefusingProxy() as proxy:
        env = codex_env(api, home, **proxy.env())
        plain = run_codex(_without_quiet(our_argv(codex_bin)), repo, env)
        assert plain.returncode == 0, plain.stderr[-2000:]
        called_home = proxy.hosts()
        assert called_home, "the control run contacted no other host: the proxy sees nothing"
        assert called_home <= {"github.com", "api.github.com", "chatgpt.com", "ab.chatgpt.com"}
        proxy.asked.clear()
        quiet = run_codex(our_argv(codex_bin), repo, env)
        assert quiet.returncode == 0, quiet.stderr[-2000:]
        assert not quiet.result.is_error
        assert proxy.asked == []
        assert len(api.response_requests()) == 4


def test_no_socket_but_loopback_under_strace(codex_bin: Path, home: Path, repo: Path) -> None:
    """No proxy at all: every connect() the CLI and its children make (DNS included) is
    to the loopback."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    trace = home / "strace.txt"
    # --seccomp-bpf: the traced processes stop at connect() only, not at every call
    # (the run's CPU 1.45 s -> 0.93-1.13 s); the filter is inherited like the trace.
    wrap = (strace, "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect", "-o", str(trace))
    with ResponsesAPI([WRITE, DONE]) as api:
        run = run_codex(our_argv(codex_bin), repo, codex_env(api, home), wrap=wrap)
    if run.returncode != 0 and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr[-300:]}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert (repo / "codex.txt").exists()
    connects = [line for line in trace.read_text().splitlines() if "connect(" in line]
    inet = [c for c in connects if "AF_INET" in c]
    assert inet, "strace saw no socket at all: the model call must have been one"
    outside = [
        c
        for c in inet
        if 'inet_addr("127.0.0.1")' not in c and 'inet_pton(AF_INET6, "::1"' not in c
    ]
    assert outside == []


# -- through a real daemon


async def _setup(d: InProcDaemon, repo: Path, env: dict[str, str], codex: Path) -> str:
    return await setup_task(
        d,
        repo,
        {"backend": "codex", "command": str(codex), "env": env},
        ("Write codex.txt", "Put hi into codex.txt", "codex.txt says hi"),
        autoCommit=False,
        phases=["implementation"],  # what these prove ends with the implementer
    )


END = {"battle_complete", "battle_failed", "battle_paused"}


@pytest.mark.anyio
async def test_a_yolo_battle_writes_a_file_and_completes_talking_to_the_fake_only(
    codex_bin: Path, home: Path, repo: Path
) -> None:
    with ResponsesAPI([WRITE, DONE]) as api, RefusingProxy() as proxy:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, codex_env(api, home, **proxy.env()), codex_bin)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until(END, timeout=120)
            assert events[-1]["type"] == "battle_complete", events[-1]
            history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
        assert proxy.asked == []
    assert (repo / "codex.txt").read_text() == "hi"
    [iteration] = history["battle"]["iterations"]
    assert iteration["result"] == "success"
    [call] = iteration["toolCalls"]
    assert call["status"] == "executed" and call["approvalMethod"] == "auto"  # nobody asked
    assert "printf hi" in json.dumps(call)
    usage = iteration["usage"]  # the fake's default usage, twice: 2400 in, 2000 cached
    assert usage["inputTokens"] == 400 and usage["cacheReadInputTokens"] == 2000
    assert usage["outputTokens"] == 80 and usage["reasoningOutputTokens"] == 32


@pytest.mark.anyio
async def test_an_api_failure_blocks_without_counting_the_iteration(
    codex_bin: Path, home: Path, repo: Path
) -> None:
    """The CLI's own retries are off (the provider's request_max_retries and
    stream_max_retries); its turn.failed is a transient API failure: the battle is
    blocked (seed 003) with a backoff, the iteration is not counted, and retried at once
    (`battle resume`) it completes within one iteration. A 429 first, then (resumed) a
    500: one battle and daemon for both, each failure checked as its own test did."""
    failures: list[tuple[ApiError, str]] = [
        (RATE_LIMITED, "rate limited (429)"),
        (SERVER_ERROR, "the model API failed (server error"),
    ]
    script: list[Turn] = [error for error, _ in failures]
    with ResponsesAPI([*script, WRITE, DONE]) as api:
        async with running_daemon(home) as d:
            task = await _setup(d, repo, codex_env(api, home), codex_bin)
            async with d.client() as watcher:
                await watcher.call("events.subscribe", {"repo": str(repo)})
                await d.call("battle.start", {"repo": str(repo), "taskId": task})
                for failed_so_far, (_, reason) in enumerate(failures, 1):
                    events = await watcher.events_until({"battle_blocked", *END}, timeout=120)
                    assert events[-1]["type"] == "battle_blocked", events[-1]
                    assert reason in events[-1]["payload"]["reason"]
                    assert events[-1]["payload"]["retryAt"]
                    history = await d.call("battle.history", {"repo": str(repo), "taskId": task})
                    iterations = history["battle"]["iterations"]
                    assert len(iterations) == failed_so_far
                    assert iterations[-1]["result"] == "cancelled"
                    task_now = await d.call("task.get", {"repo": str(repo), "taskId": task})
                    assert task_now["task"]["status"] != "failed"
                    api.release()  # the next request takes the next turn
                    await d.call("battle.resume", {"repo": str(repo), "taskId": task})
                events = await watcher.events_until(END, timeout=120)
            assert events[-1]["type"] == "battle_complete", events[-1]
    # one refused call per failure: no retries of its own
    assert len(api.response_requests()) == len(failures) + 2
    assert (repo / "codex.txt").read_text() == "hi"
