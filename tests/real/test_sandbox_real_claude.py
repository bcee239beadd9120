"""The real Claude Code CLI confined by our sandbox, its model calls through our proxy.

What this proves (docs/sandbox.md, "Claude Code"): inside bubblewrap with ``network:
allowlist``, the CLI reaches the scripted Messages API on the host's 127.0.0.1 only
through the egress proxy (its ``HTTP(S)_PROXY``; the run's own loopback has nothing else),
its Bash tool writes the working tree, and the planted key is not there. Its own bash
sandbox stays as the user configured it (off by default): ours confines the whole run.
Skipped without the CLI (tests/real/install.sh) or without a working bubblewrap.
"""

from __future__ import annotations

import os
import shlex
import threading
from typing import TYPE_CHECKING

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest

from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.sandbox import EgressProxy, NetworkRequest, build_policy, bwrap_argv, needs_for
from pokeralphd.sandbox import probe as sandbox_probe
from tests.fakes.messages_api import MessagesAPI, Text, ToolUse
from tests.helpers import short_tmpdir
from tests.real.conftest import allow, claude_env, drive

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pokeralphd.sandbox import Decision

pytestmark = pytest.mark.skipif(
    not sandbox_probe().ok, reason=f"no sandbox here: {sandbox_probe().reason}"
)

PEEK = {
    "command": "echo hi > claude.txt && (cat ~/.ssh/id_rsa || echo no-key)",
    "description": "Write a file",
}


class ProxyThread:
    """An :class:`EgressProxy` served from a thread of its own (the CLI is driven
    synchronously), recording what it was asked."""

    def __init__(self, proxy: EgressProxy, path: str) -> None:
        self.proxy, self.path = proxy, path
        self._ready = threading.Event()
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._thread = threading.Thread(target=anyio.run, args=(self._serve,), daemon=True)

    async def _serve(self) -> None:
        with anyio.CancelScope() as scope:
            self._scope, self._token = scope, anyio.lowlevel.current_token()
            async with anyio.create_task_group() as tg:
                await tg.start(self.proxy.serve, self.path)
                self._ready.set()

    def __enter__(self) -> ProxyThread:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._scope is not None and self._token is not None:
            anyio.from_thread.run_sync(self._scope.cancel, token=self._token)
        self._thread.join(10)


@pytest.fixture
def planted(claude_home: Path) -> Iterator[Path]:
    (claude_home / ".ssh").mkdir()
    (claude_home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    yield claude_home


def test_claude_completes_inside_our_sandbox_through_the_proxy(
    claude_bin: Path, repo: Path, planted: Path, tmp_path: Path
) -> None:
    asked: list[NetworkRequest] = []

    async def decide(request: NetworkRequest) -> Decision:
        asked.append(request)
        return "deny"

    tool = ToolUse("Bash", PEEK, text="Writing.")
    with MessagesAPI([tool, Text("Finished.")]) as api:
        env = claude_env(api, planted)
        sock = str(short_tmpdir("prpx") / "proxy.sock")
        policy = build_policy(
            repo,
            config=SandboxConfig(),
            needs=needs_for("claude", env, planted),
            home=planted,
            extra_read_only=(os.path.realpath(claude_bin.parents[2]),),
            proxy_socket=sock,
        )
        assert [str(a) for a in policy.allow] == [api.url.split("//")[1].split("/")[0]]
        # The CLI as the daemon will start it: through the wrapper.
        wrapper = tmp_path / "claude-confined"
        command = shlex.join(bwrap_argv(policy, [os.path.realpath(claude_bin)]))
        wrapper.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        wrapper.chmod(0o755)
        proxy = EgressProxy(policy.allow, decide)
        with ProxyThread(proxy, sock):
            run = drive(wrapper, api, repo, planted, "write the file", allow)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.result["subtype"] == "success" and run.result["result"] == "Finished."
    [result] = api.tool_results()
    text = str(result.get("content"))
    assert "no-key" in text and "PRIVATE KEY" not in text, result
    assert (repo / "claude.txt").read_text() == "hi\n"
    assert asked == []  # the model endpoint was allowed; nothing else was tried
    assert proxy.let_through >= 1  # the run's loopback has no API: the proxy carried it
