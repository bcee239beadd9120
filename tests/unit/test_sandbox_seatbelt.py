"""The Seatbelt profile (macOS ``sandbox-exec``) of a policy: generated and checked here,
never run (no Mac in this machine's tests; docs/sandbox.md)."""

from __future__ import annotations

from pathlib import Path

from pokeralph_core.config.sandbox import SandboxConfig
from pokeralphd.sandbox import SandboxPolicy, build_policy, needs_for
from pokeralphd.sandbox.seatbelt import profile, quote, sandbox_exec_argv
from tests.helpers import make_git_repo, short_tmpdir


def _policy(network: str = "allowlist") -> tuple[SandboxPolicy, Path]:
    home = short_tmpdir("prsb") / "home"
    tree = make_git_repo(home / "src" / "repo")
    return (
        build_policy(
            tree,
            config=SandboxConfig.model_validate(
                {"network": {"mode": network}, "filesystem": {"readOnly": ["~/.cache"]}}
            ),
            needs=needs_for("codex", {}, home),
            home=home,
            install=("/opt/py",),
            private=(home / "src" / "other",),
        ),
        home,
    )


def test_the_profile_denies_by_default_and_orders_its_rules() -> None:
    policy, home = _policy()
    text = profile(policy, tmpdir="/private/var/folders/run1", proxy_port=3128, run_socket="/r/s")
    lines = text.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]

    def at(fragment: str) -> int:
        return next(i for i, line in enumerate(lines) if fragment in line)

    # reads: all, then $HOME denied, then what is listed allowed, then secrets denied last
    assert at("(allow file-read*)") < at(f"(deny file-read* (subpath {quote(str(home))}))")
    listed = at("(allow file-read* (subpath")
    assert at("(deny file-read* (subpath") < listed
    assert f'(subpath "{home}/.codex")' in lines[listed] and '(subpath "/opt/py")' in lines[listed]
    secrets = at("(deny file-read* file-write*")
    assert secrets > listed and f'(subpath "{home}/.ssh")' in lines[secrets]
    assert f'(subpath "{home}/src/other")' in lines[secrets]
    # writes: the tree, the backend's folder, the run's tmp; .git and .pokeralph denied after
    writes = at("(allow file-write* (subpath")
    assert f'(subpath "{policy.tree}")' in lines[writes]
    assert '(subpath "/private/var/folders/run1")' in lines[writes]
    ro = at("(deny file-write* (subpath")
    assert ro > writes and f'(subpath "{policy.tree}/.git")' in lines[ro]
    assert f'(subpath "{policy.tree}/.pokeralph")' in lines[ro]
    # network: the proxy's port on the loopback only, and the run's socket
    assert '(allow network-outbound (remote ip "localhost:3128"))' in lines
    assert '(allow network-outbound (remote unix-socket (path-literal "/r/s")))' in lines
    assert "(allow network*)" not in lines
    assert text.count("(") == text.count(")")


def test_network_none_and_full() -> None:
    none, _ = _policy("none")
    text = profile(none, tmpdir="/t", proxy_port=3128)
    assert "network-outbound" not in text and "network*" not in text
    full, _ = _policy("full")
    assert "(allow network*)" in profile(full, tmpdir="/t")


def test_quoting_and_the_command_line() -> None:
    assert quote('/a "b"\\c') == '"/a \\"b\\"\\\\c"'
    assert sandbox_exec_argv("/p.sb", ["make"]) == ["/usr/bin/sandbox-exec", "-f", "/p.sb", "make"]
