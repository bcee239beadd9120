"""macOS's sandbox as the daemon runs it, exercised here on Linux with the platform's
probe answered for macOS: each run gets its Seatbelt profile in its private folder
(0600), the command becomes ``sandbox-exec -f PROFILE …``, its environment names its own
TMPDIR, its socket by path and the egress proxy on a loopback port; and that proxy, on
TCP since a Seatbelt run shares the host's network, lets an allowed host through and
refuses another, asking first. ``sandbox-exec`` itself is never run (docs/sandbox.md)."""

from __future__ import annotations

import http.server
import os
import stat
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.sandbox import seatbelt
from pokeralphd.sandbox.bwrap import Probe
from pokeralphd.sandbox.proxy import Decision, NetworkRequest
from pokeralphd.sandbox.service import SandboxService
from tests.helpers import make_git_repo, short_tmpdir

pytestmark = pytest.mark.anyio


def test_the_probe_is_macos_and_sandbox_exec() -> None:
    assert not seatbelt.probe("linux").ok
    assert not seatbelt.probe("darwin", "/nonexistent/sandbox-exec").ok
    found = seatbelt.probe("darwin", "/bin/sh")  # any executable stands in for it
    assert found.ok and found.kind == "seatbelt" and found.bwrap == "/bin/sh"


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _get(url: str, proxy_port: int) -> str:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{proxy_port}"})
    )
    try:
        with opener.open(url, timeout=10) as reply:
            return str(reply.read().decode())
    except urllib.error.HTTPError as exc:
        return f"{exc.code}: {exc.read().decode()}"


async def test_a_seatbelt_run_is_profiled_and_its_proxy_listens_on_the_loopback(
    home: Path,
) -> None:
    tree = make_git_repo(home / "repo")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    allowed = f"127.0.0.1:{server.server_address[1]}"
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    asked: list[NetworkRequest] = []

    async def decide(request: NetworkRequest) -> Decision:
        asked.append(request)
        return "deny"

    service = SandboxService(
        runtime_dir=short_tmpdir("prsb"),
        probe=lambda: Probe(True, "/usr/bin/sandbox-exec", kind="seatbelt"),
    )
    config = SandboxConfig.model_validate({"network": {"mode": "allowlist", "allow": [allowed]}})
    try:
        async with service.run(
            config, tree=tree, scope=None, env={"HOME": str(home)}, decide=decide
        ) as box:
            assert box.confined and box.env == {"POKERALPH_SANDBOX": "seatbelt"}
            assert box.proxy_port is not None
            argv, env = box.wrap(["/bin/echo", "hi"], {"PATH": "/usr/bin:/bin"}, str(tree))
            assert argv[:2] == ["/usr/bin/sandbox-exec", "-f"] and argv[3:] == ["/bin/echo", "hi"]
            profile = Path(argv[2])
            assert stat.S_IMODE(profile.stat().st_mode) == 0o600
            text = profile.read_text()
            assert text.startswith("(version 1)\n(deny default)")
            assert f'(remote ip "localhost:{box.proxy_port}")' in text
            assert f'(remote ip "localhost:{server.server_address[1]}")' in text  # forwarded
            assert env["HTTPS_PROXY"] == f"http://127.0.0.1:{box.proxy_port}"
            assert env["NO_PROXY"] == "" and env["PATH"] == "/usr/bin:/bin"
            assert Path(env["TMPDIR"]).parent == profile.parent
            # the proxy, for real, on TCP: the allowed server goes through, the other asks
            port = box.proxy_port
            got = await anyio.to_thread.run_sync(_get, f"http://{allowed}/", port)
            assert got == "hello"
            url = f"http://127.0.0.1:{other.server_address[1]}/"
            refused = await anyio.to_thread.run_sync(_get, url, port)
            assert refused.startswith("403") and "sandbox.network.allow" in refused
            assert [(r.host, r.port) for r in asked] == [("127.0.0.1", other.server_address[1])]
        assert not profile.parent.exists()  # the run's folder goes with it
    finally:
        for each in (server, other):
            each.shutdown()
            each.server_close()


async def test_required_on_a_mac_without_sandbox_exec_names_no_package(home: Path) -> None:
    from pokeralphd.sandbox.service import SandboxUnavailable

    service = SandboxService(
        probe=lambda: Probe(False, None, "/usr/bin/sandbox-exec is missing", kind="seatbelt")
    )
    with pytest.raises(SandboxUnavailable) as caught:
        service.check(SandboxConfig.model_validate({"mode": "required"}))
    assert "sandbox-exec is missing" in caught.value.message
    assert "apt" not in caught.value.message
    assert os.environ.get("POKERALPH_SANDBOX") is None
