"""A run confined by real bubblewrap: what it can read, write, see and reach.

Each test builds a policy for a test ``$HOME`` (a planted ``~/.ssh/id_rsa``, another
registered repository, the daemon's runtime folder and web token) and runs real commands
through ``bwrap_argv``. Skipped only when bubblewrap cannot run here at all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import psutil
import pytest

from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.sandbox import (
    EgressProxy,
    NetworkRequest,
    SandboxPolicy,
    build_policy,
    bwrap_argv,
    needs_for,
    probe,
)
from tests.helpers import make_git_repo, short_tmpdir, wait_until

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pokeralphd.sandbox import Decision

pytestmark = pytest.mark.skipif(not probe().ok, reason=f"no sandbox here: {probe().reason}")


@dataclass
class World:
    """A test $HOME with secrets planted, the run's tree, and what must stay hidden."""

    home: Path
    tree: Path
    other_repo: Path
    runtime: Path
    token: Path

    def policy(self, install: tuple[str, ...] | None = None, **config: Any) -> SandboxPolicy:
        return build_policy(
            self.tree,
            config=SandboxConfig.model_validate(config),
            needs=needs_for("command", {}, self.home),
            home=self.home,
            private=(self.other_repo, self.runtime, self.token),
            install=install,
        )

    def run(self, policy: SandboxPolicy, script: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(self.home)}
        argv = bwrap_argv(policy, ["sh", "-c", script])
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, check=False
        )


@pytest.fixture
def world() -> Iterator[World]:
    base = short_tmpdir("prsbx")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / ".netrc").write_text("machine x password y\n")
    tree = make_git_repo(home / "src" / "repo")
    (tree / ".pokeralph").mkdir()
    (tree / ".pokeralph" / "progress.json").write_text("{}\n")
    other = make_git_repo(home / "src" / "other")
    runtime = home / "run"
    runtime.mkdir(mode=0o700)
    token = runtime / "pokeralphd.web-token"
    token.write_text("web secret\n")
    yield World(home, tree, other, runtime, token)


def test_a_planted_key_cannot_be_read_even_in_a_listed_home(world: World) -> None:
    for policy in (world.policy(), world.policy(filesystem={"readOnly": ["~"]})):
        done = world.run(
            policy,
            "cat ~/.ssh/id_rsa; cat ~/.netrc; cat run/pokeralphd.web-token;"
            " ls ~/src/other; echo end",
        )
        assert "PRIVATE KEY" not in done.stdout and "password" not in done.stdout
        assert "web secret" not in done.stdout and "README" not in done.stdout
        assert done.stdout.strip().endswith("end"), done.stderr
    # Listed, the home is readable (the tree's parent, say); its secrets are not.
    shown = world.run(world.policy(filesystem={"readOnly": ["~"]}), "ls -a ~ ~/.ssh")
    assert "src" in shown.stdout and "id_rsa" not in shown.stdout


def test_nothing_outside_the_tree_can_be_written_and_the_tree_can(world: World) -> None:
    marker = f"pokeralph-sandbox-{os.getpid()}"
    targets = [
        str(world.home / "x"),
        f"/tmp/{marker}",
        str(world.other_repo / "x"),
        str(world.tree / ".git" / "hooks" / "pre-commit"),
        str(world.tree / ".git" / "config"),
        str(world.tree / ".pokeralph" / "progress.json"),
        str(world.runtime / "x"),
    ]
    # Listed read-write, the home is writable: still never the secrets, the other
    # repository, .git or .pokeralph.
    for policy in (world.policy(), world.policy(filesystem={"readWrite": ["~"]})):
        script = "; ".join(f"echo pwned >> {t}" for t in targets)
        done = world.run(policy, script + "; echo ok > written.txt; cat written.txt")
        assert done.stdout.strip() == "ok", done.stderr
    assert (world.tree / "written.txt").read_text() == "ok\n"
    assert not Path(f"/tmp/{marker}").exists()
    assert not (world.other_repo / "x").exists() and not (world.runtime / "x").exists()
    assert not (world.tree / ".git" / "hooks" / "pre-commit").exists()
    assert "pwned" not in (world.tree / ".git" / "config").read_text()
    assert (world.tree / ".pokeralph" / "progress.json").read_text() == "{}\n"
    assert (world.home / "x").read_text() == "pwned\n"  # only where readWrite listed it
    assert (world.home / ".ssh" / "id_rsa").read_text() == "PRIVATE KEY\n"


def test_a_planning_run_writes_nothing(world: World) -> None:
    policy = build_policy(
        world.tree,
        config=SandboxConfig(),
        needs=needs_for("command", {}, world.home),
        home=world.home,
        tree_writable=False,
    )
    done = world.run(policy, "echo x > plan.txt")
    assert done.returncode != 0 and "Read-only" in done.stderr
    assert not (world.tree / "plan.txt").exists()


def test_git_reads_work_inside(world: World) -> None:
    (world.tree / "new.txt").write_text("new\n")
    done = world.run(world.policy(), "git status --short && git log --oneline -1 && git diff")
    assert done.returncode == 0, done.stderr
    assert "?? new.txt" in done.stdout and len(done.stdout.splitlines()) >= 2


def test_the_host_process_tree_is_not_visible(world: World) -> None:
    done = world.run(world.policy(), "ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline")
    count, cmdline = done.stdout.split("\n", 1)
    assert int(count) <= 4, done.stdout  # bwrap's init, sh, ls, grep
    assert "bwrap" in cmdline
    assert not Path(f"/proc/{os.getpid()}").is_dir() or done.stdout.count("pytest") == 0


def test_the_run_dies_with_its_wrapper(world: World) -> None:
    argv = bwrap_argv(world.policy(), ["sh", "-c", "sleep 300 & sleep 301 & echo up; wait"])
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, env={**os.environ, "HOME": str(world.home)}
    ) as wrapper:
        try:
            assert wrapper.stdout is not None and wrapper.stdout.readline() == b"up\n"

            def both_sleeping() -> list[psutil.Process]:
                tree = psutil.Process(wrapper.pid).children(recursive=True)
                return tree if sum(p.name() == "sleep" for p in tree) == 2 else []

            tree = wait_until(both_sleeping, what="both sleeps started")
            os.kill(wrapper.pid, signal.SIGKILL)
            wrapper.wait()
            _gone, alive = psutil.wait_procs(tree, timeout=10)
            assert alive == []
        finally:
            wrapper.kill()


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[1]}".encode()  # type: ignore[index]
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    """Two HTTP servers on the host's 127.0.0.1."""
    made = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in made]
    for t in threads:
        t.start()
    yield made[0].server_address[1], made[1].server_address[1]
    for s in made:
        s.shutdown()
        s.server_close()


FETCH = (
    "import sys, urllib.request, urllib.error\n"
    "for url in sys.argv[1:]:\n"
    "    try:\n"
    "        print(urllib.request.urlopen(url, timeout=20).read().decode())\n"
    "    except urllib.error.HTTPError as e:\n"
    "        print(e.code, e.read().decode().strip())\n"
    "    except OSError as e:\n"
    "        print('failed', type(e).__name__)\n"
)


def test_no_network_reaches_no_host_server(world: World, servers: tuple[int, int]) -> None:
    port = servers[0]
    probe_script = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\n"
        "except OSError as e:\n    print('refused', e)\n"
    )
    done = subprocess.run(
        bwrap_argv(world.policy(network={"mode": "none"}), [sys.executable, "-c", probe_script]),
        env={**os.environ, "HOME": str(world.home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.startswith("refused"), (done.stdout, done.stderr)
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # from outside it is there


@pytest.mark.anyio
async def test_the_allowlist_goes_through_the_proxy_and_asks_for_the_rest(
    world: World, servers: tuple[int, int]
) -> None:
    allowed, other = servers
    asked: list[dict[str, object]] = []
    refused: list[str] = []
    answers: list[Decision] = ["deny", "allow_always"]

    async def decide(request: NetworkRequest) -> Decision:
        asked.append(request.params())
        return answers.pop(0)

    proxy = EgressProxy(
        world.policy(network={"allow": [f"127.0.0.1:{allowed}"]}).allow,
        decide,
        on_refused=lambda request, message: refused.append(message),
    )
    sock = str(short_tmpdir("prpx") / "proxy.sock")
    policy = build_policy(
        world.tree,
        config=SandboxConfig.model_validate({"network": {"allow": [f"127.0.0.1:{allowed}"]}}),
        needs=needs_for("command", {}, world.home),
        home=world.home,
        proxy_socket=sock,
    )
    urls = [f"http://127.0.0.1:{allowed}/", f"http://127.0.0.1:{other}/"]

    async def fetch() -> str:
        argv = bwrap_argv(policy, [sys.executable, "-c", FETCH, *urls])
        done = await anyio.run_process(
            argv, env={**os.environ, "HOME": str(world.home)}, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve, sock)
        first = await fetch()
        second = await fetch()
        third = await fetch()
        with anyio.fail_after(10):  # every connection closed before the listener goes
            await proxy.idle()
        tg.cancel_scope.cancel()
    assert first.splitlines()[0] == f"hello from {allowed}"
    assert first.splitlines()[1] == (
        f"403 pokeralph sandbox: the connection to 127.0.0.1:{other} was refused:"
        f" 127.0.0.1:{other} is not in sandbox.network.allow. To allow it, add"
        f' "127.0.0.1:{other}" to sandbox.network.allow, or allow it when asked.'
    )
    assert refused == [first.splitlines()[1].removeprefix("403 ")]
    assert second.splitlines() == [f"hello from {allowed}", f"hello from {other}"]
    assert third == second  # allowed always: not asked again
    assert asked == [{"host": "127.0.0.1", "port": other}] * 2
    assert not Path(sock).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="shows the unprivileged case from root")
def test_it_confines_as_an_unprivileged_user_too(world: World) -> None:
    """The daemon runs as a user, not root: bubblewrap (not setuid here) then makes a
    user namespace of its own. The same confinement holds as uid 65534."""
    setpriv = "/usr/bin/setpriv"
    if not os.path.exists(setpriv):
        pytest.skip("setpriv is not installed")
    subprocess.run(["chown", "-R", "65534:65534", str(world.home.parent)], check=True)
    os.chmod(world.home.parent, 0o755)
    argv = bwrap_argv(
        world.policy(install=()),  # root's interpreter is not the user's to see: sh only
        ["sh", "-c", "id -u; cat ~/.ssh/id_rsa; echo x > .git/config; echo ok > t; cat t"],
    )
    done = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
        env={"HOME": str(world.home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["65534", "ok"], done.stderr
    assert "Read-only file system" in done.stderr
