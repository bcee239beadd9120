"""The real Codex CLI confined by our sandbox, its model calls through our proxy.

What this proves (docs/sandbox.md, "Codex"): inside bubblewrap with ``network:
allowlist``, ``codex exec`` with our argv for a confined run (``--sandbox
danger-full-access``: ours replaces Codex's own) reaches the scripted Responses API on
the host's 127.0.0.1 only through the egress proxy (the run's own loopback has nothing
else), its shell command writes the working tree, and the planted key is not there.
Skipped without the CLI (tests/real/install.sh) or without a working bubblewrap.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.sandbox import (
    CONFINED_ENV,
    EgressProxy,
    NetworkRequest,
    build_policy,
    bwrap_argv,
    needs_for,
    probe,
)
from tests.fakes.responses_api import Call, ResponsesAPI, Say
from tests.helpers import make_git_repo, short_tmpdir
from tests.real.test_real_codex import DEFAULT_CODEX, codex_env, run_codex

pytestmark = pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}")


@pytest.fixture
def codex_bin() -> Path:
    path = Path(os.environ.get("POKERALPH_REAL_CODEX") or DEFAULT_CODEX)
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.skip(f"real Codex CLI not installed at {path} (run tests/real/install.sh)")
    return path


@pytest.fixture
def repo(home: Path) -> Path:
    return make_git_repo(home / "repo")


WRITE_AND_PEEK = Call(
    "exec_command",
    {"cmd": "printf hi > codex.txt && cat codex.txt && (cat ~/.ssh/id_rsa || echo no-key)"},
    text="Writing.",
)


@pytest.mark.anyio
@pytest.mark.parametrize("own", ["replaced", "nested"])
async def test_codex_completes_inside_our_sandbox_through_the_proxy(
    codex_bin: Path, home: Path, repo: Path, own: str
) -> None:
    """``replaced``: our argv for a confined run (danger-full-access). ``nested``: Codex's
    own workspace-write inside ours, which runs too (nested user namespaces work here),
    but its commands get no network at all, the proxy included."""
    asked: list[NetworkRequest] = []

    async def decide(request: NetworkRequest) -> str:
        asked.append(request)
        return "deny"

    with ResponsesAPI([WRITE_AND_PEEK, Say("Done. <promise>COMPLETE</promise>")]) as api:
        env = codex_env(api, home)
        user_home = Path(env["HOME"])
        (user_home / ".ssh").mkdir()
        (user_home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
        api_port = api.url.split("//")[1].split("/")[0]
        sock = str(short_tmpdir("prpx") / "proxy.sock")
        policy = build_policy(
            repo,
            config=SandboxConfig.model_validate({"network": {"allow": [api_port]}}),
            needs=needs_for("codex", env, user_home),
            home=user_home,
            extra_read_only=(os.path.realpath(codex_bin.parents[2]),),
            proxy_socket=sock,
        )
        confined = {CONFINED_ENV: "bwrap"} if own == "replaced" else {}
        request = AgentRequest(
            prompt="-",
            cwd=repo,
            mode="execute",
            config=AgentConfig(backend="codex", command=str(codex_bin)),
            env=confined,
        )
        argv = CodexBackend().argv(request)
        assert ("danger-full-access" in argv) == (own == "replaced")
        proxy = EgressProxy(policy.allow, decide)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve, sock)
            run = await anyio.to_thread.run_sync(
                lambda: run_codex(argv, repo, env, wrap=tuple(bwrap_argv(policy, [])))
            )
            tg.cancel_scope.cancel()
        assert run.returncode == 0, run.stderr[-2000:]
        assert not run.result.is_error and "COMPLETE" in run.result.text
        [output] = api.function_outputs()
        assert "hi" in output["output"] and "no-key" in output["output"], output
        assert "PRIVATE KEY" not in output["output"]
        assert (repo / "codex.txt").read_text() == "hi"
        assert len(api.response_requests()) == 2
        assert asked == []  # the model endpoint was allowed; nothing else was tried
        assert proxy.let_through >= 1  # the run's loopback has no API: the proxy carried it
