"""The policy: what is mounted in which order, what is refused, what each backend needs,
and the bubblewrap command line it becomes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pokeralph_core.config.model import AgentConfig
from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.agents.base import AgentRequest
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.errors import InvalidParams
from pokeralphd.sandbox import (
    CONFINED_ENV,
    PROXY_SOCKET,
    RUN_SOCKET,
    Mount,
    SandboxPolicy,
    build_policy,
    bwrap_argv,
    needs_for,
)
from pokeralphd.sandbox.bwrap import _probe, probe
from pokeralphd.sandbox.policy import git_dirs
from tests.helpers import make_git_repo, short_tmpdir


@pytest.fixture
def home() -> Path:
    home = short_tmpdir("prpol") / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key\n")
    (home / ".netrc").write_text("x\n")
    return home


def policy(home: Path, tree: Path | None = None, **config: object) -> SandboxPolicy:
    tree = tree or make_git_repo(home / "src" / "repo")
    return build_policy(
        tree,
        config=SandboxConfig.model_validate(config),
        needs=needs_for("claude", {}, home),
        home=home,
        private=(home / "src" / "other",),
        install=("/opt/py",),
    )


def test_mounts_go_shallow_to_deep_and_secrets_last(home: Path) -> None:
    p = policy(home, filesystem={"readOnly": ["~"]})
    mounts = p.mounts()
    order = [(m.kind, m.path) for m in mounts]
    tree = p.tree
    home_s = str(home)
    assert order.index(("tmpfs", home_s)) < order.index(("ro", home_s))
    assert order.index(("ro", home_s)) < order.index(("rw", tree))
    assert order.index(("rw", tree)) < order.index(("ro", tree + "/.git"))
    assert order.index(("rw", tree)) < order.index(("ro", tree + "/.pokeralph"))
    assert ("rw", f"{home_s}/.claude") in order and ("rw", f"{home_s}/.claude.json") in order
    hides = [m for m in mounts if m.kind == "hide"]
    assert mounts[-len(hides) :] == hides
    assert {m.path for m in hides} >= {f"{home_s}/.ssh", f"{home_s}/.netrc"}
    assert Mount("hide", f"{home_s}/src/other") in hides


def test_secrets_need_no_hiding_in_a_hidden_home(home: Path) -> None:
    assert [m for m in policy(home).mounts() if m.kind == "hide"] == []


@pytest.mark.parametrize(
    ("key", "listed"),
    [
        ("readOnly", "~/.ssh"),
        ("readOnly", "~/.ssh/id_rsa"),
        ("readWrite", "~/.config/gh"),
        ("readOnly", "~/src/other/README.md"),
    ],
)
def test_a_listing_of_a_secret_is_refused(home: Path, key: str, listed: str) -> None:
    with pytest.raises(InvalidParams, match="never visible") as caught:
        policy(home, filesystem={key: [listed]})
    assert caught.value.data["field"] == f"sandbox.filesystem.{key}"


def test_a_secret_through_a_link_is_refused_too(home: Path) -> None:
    (home / "keys").symlink_to(home / ".ssh")
    with pytest.raises(InvalidParams, match="never visible"):
        policy(home, filesystem={"readOnly": ["~/keys"]})


def test_the_root_cannot_be_listed(home: Path) -> None:
    with pytest.raises(InvalidParams, match="list the folders"):
        policy(home, filesystem={"readWrite": ["/"]})


def test_a_worktree_shows_its_git_folders_read_only(home: Path) -> None:
    main = make_git_repo(home / "src" / "repo")
    linked = home / "wt"
    subprocess.run(
        ["git", "-C", str(main), "worktree", "add", "-q", str(linked)],
        check=True,
        capture_output=True,
    )
    found = git_dirs(linked)
    real_main = os.path.realpath(main)
    assert found[0] == str(linked / ".git")
    assert any(d.startswith(real_main + "/.git/worktrees/") for d in found)
    assert real_main + "/.git" in found


def test_the_environment_names_the_run_socket_and_the_proxy(home: Path) -> None:
    tree = make_git_repo(home / "src" / "repo")
    p = build_policy(
        tree,
        config=SandboxConfig(),
        needs=needs_for("command", {}, home),
        home=home,
        run_socket="/run/user/1/pokeralph/run-1.sock",
        proxy_socket="/run/user/1/pokeralph/proxy-1.sock",
        install=(),
    )
    env = p.environment()
    assert env["POKERALPH_SOCKET"] == RUN_SOCKET
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == ""  # the host's loopback too goes through the proxy
    off = build_policy(
        tree,
        config=SandboxConfig.model_validate({"network": {"mode": "none"}}),
        needs=needs_for("command", {}, home),
        home=home,
        proxy_socket="/x.sock",
        install=(),
    )
    assert off.proxy_socket is None and off.environment()["HTTPS_PROXY"] is None
    assert off.environment()["POKERALPH_SOCKET"] is None  # the daemon's is never inherited


def test_the_bwrap_command_line(home: Path) -> None:
    tree = make_git_repo(home / "src" / "repo")
    p = build_policy(
        tree,
        config=SandboxConfig(),
        needs=needs_for("command", {}, home),
        home=home,
        run_socket="/r/run.sock",
        proxy_socket="/r/proxy.sock",
        install=(),
    )
    argv = bwrap_argv(p, ["make", "test"], bwrap="/usr/bin/bwrap", python="/py")
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--die-with-parent", "--unshare-pid", "--unshare-net"):
        assert flag in argv
    assert "--new-session" not in argv  # spawn's setsid is enough; the group must hold
    assert argv[argv.index("--proc") + 1] == "/proc" and argv[argv.index("--tmpfs") + 1] == "/tmp"
    tree_at = argv.index(p.tree)
    assert argv[tree_at - 1] == "--bind" and argv.index(p.tree + "/.git") > tree_at
    assert argv[argv.index("/r/run.sock") + 1] == RUN_SOCKET
    assert argv[argv.index("/r/proxy.sock") + 1] == PROXY_SOCKET
    end = argv.index("--", argv.index("--chdir"))
    assert argv[end + 1 : end + 4] == ["/py", "-I", "-S"] and argv[end + 4].endswith("bridge.py")
    assert argv[-4:] == [PROXY_SOCKET, "--", "make", "test"]
    full = build_policy(
        tree,
        config=SandboxConfig.model_validate({"network": {"mode": "full"}}),
        needs=needs_for("command", {}, home),
        home=home,
        install=(),
    )
    full_argv = bwrap_argv(full, ["true"])
    assert "--unshare-net" not in full_argv and full_argv[-2:] == ["--", "true"]


def test_a_hidden_file_is_dev_null_and_a_folder_an_empty_read_only_tmpfs(home: Path) -> None:
    argv = bwrap_argv(policy(home, filesystem={"readOnly": ["~"]}), ["true"])
    at = argv.index(f"{home}/.netrc")
    assert argv[at - 2 : at] == ["--ro-bind", "/dev/null"]
    ssh = f"{home}/.ssh"
    assert ["--tmpfs", ssh, "--remount-ro", ssh] == argv[argv.index(ssh) - 1 : argv.index(ssh) + 3]


def test_each_backend_declares_what_it_needs(home: Path) -> None:
    claude = needs_for("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000/v1"}, home)
    assert claude.read_write == (home / ".claude", home / ".claude.json")
    assert claude.model_hosts == ("127.0.0.1:9000",) and claude.own_sandbox == "keep"
    assert needs_for("claude", {"CLAUDE_CONFIG_DIR": "/c"}, home).read_write == (Path("/c"),)
    assert needs_for("claude", {}, home).model_hosts == ("api.anthropic.com",)
    codex = needs_for("codex", {"CODEX_HOME": "/ch"}, home)
    assert codex.read_write == (Path("/ch"),) and codex.own_sandbox == "off"
    assert needs_for("codex", {}, home).read_write == (home / ".codex",)
    local = needs_for("local", {"POKERALPH_REPO_PATH": "/r", "POKERALPH_TASK_ID": "t-1"}, home)
    assert local.read_write == (Path("/r/.pokeralph/battles/t-1/sessions"),)
    assert needs_for("local", {"POKERALPH_REPO_PATH": "/r", "POKERALPH_TASK_ID": ".."}, home) == (
        needs_for("local", {}, home)
    )
    assert needs_for("command", {}, home).read_write == ()


@pytest.mark.parametrize("mode", ["execute", "plan"])
def test_codex_turns_its_own_sandbox_off_only_inside_ours(mode: str) -> None:
    def argv(env: dict[str, str]) -> list[str]:
        request = AgentRequest(
            prompt="p",
            cwd=Path("."),
            mode="plan" if mode == "plan" else "execute",
            config=AgentConfig(backend="codex", env={CONFINED_ENV: "x"}),
            env=env,
        )
        return CodexBackend().argv(request)

    own = argv({})  # agent.env cannot turn it off: only the daemon's run env
    assert own[own.index("--sandbox") + 1] == ("read-only" if mode == "plan" else "workspace-write")
    ours = argv({CONFINED_ENV: "bwrap"})
    assert ours[ours.index("--sandbox") + 1] == "danger-full-access"


def test_the_probe_names_the_package_and_is_cached() -> None:
    _probe.cache_clear()
    missing = probe("/nonexistent/bwrap")
    assert not missing.ok and "bwrap" in missing.reason
    assert probe("/nonexistent/bwrap") is missing
    _probe.cache_clear()


def test_the_probe_names_the_debian_package_when_bwrap_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(short_tmpdir("prnobw")))
    _probe.cache_clear()
    try:
        found = probe()
        assert not found.ok and "apt install bubblewrap" in found.reason
    finally:
        _probe.cache_clear()
