"""A command runs in the Terminal it is given: its environment, directory and streams,
never the process's own (the tests run pokeralphctl in-process on this)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from pokeralphctl.cli import main
from pokeralphctl.parsing import Parser
from pokeralphctl.terminal import Terminal
from tests.helpers import DaemonProcess, make_git_repo


def terminal(env: dict[str, str], cwd: Path, typed: str = "") -> Terminal:
    return Terminal(env, str(cwd), io.StringIO(typed), io.StringIO(), io.StringIO())


def output(term: Terminal) -> str:
    assert isinstance(term.stdout, io.StringIO)
    return term.stdout.getvalue()


def test_socket_option_leaves_the_process_environment_alone(
    daemon: DaemonProcess, home: Path
) -> None:
    env = {k: v for k, v in daemon.env.items() if k != "POKERALPH_SOCKET"}
    before = dict(os.environ)
    term = terminal(env, home)
    assert main(["--socket", str(daemon.socket), "ping"], term) == 0
    assert output(term).startswith("pong")
    assert dict(os.environ) == before


def test_a_relative_socket_in_the_environment_is_the_terminals(daemon: DaemonProcess) -> None:
    relative = os.path.relpath(daemon.socket, daemon.home)
    assert not os.path.isabs(relative) and os.getcwd() != str(daemon.home)
    term = terminal({**daemon.env, "POKERALPH_SOCKET": relative}, daemon.home)
    assert main(["ping"], term) == 0, term.stderr


def test_relative_paths_resolve_in_the_terminals_directory(
    daemon: DaemonProcess, home: Path
) -> None:
    repo = make_git_repo(home / "work" / "shop")
    assert os.getcwd() != str(repo.parent)
    term = terminal(daemon.env, repo.parent)
    assert main(["init", "shop"], term) == 0, term.stderr
    assert str(repo) in output(term)
    term = terminal(daemon.env, repo)
    assert main(["status"], term) == 0
    assert any(str(repo) in line for line in output(term).splitlines())


def test_home_comes_from_the_terminals_environment(tmp_path: Path) -> None:
    term = terminal({"HOME": str(tmp_path)}, Path("/"))
    assert term.abspath("~/x/../y") == str(tmp_path / "y")
    assert term.abspath("z") == "/z"
    gone = Terminal({}, None, io.StringIO(), io.StringIO(), io.StringIO())
    with pytest.raises(FileNotFoundError):
        gone.abspath("relative")


def test_xdg_folders_come_from_the_environment_when_absolute(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": "/xdg/state", "XDG_CONFIG_HOME": "rel"}
    term = terminal(env, Path("/elsewhere"))
    assert term.xdg_dir("XDG_STATE_HOME", ".local/state") == "/xdg/state"
    # relative: ignored, as the XDG spec says (not resolved against the directory)
    assert term.xdg_dir("XDG_CONFIG_HOME", ".config") == str(tmp_path / ".config")
    assert term.xdg_dir("XDG_CACHE_HOME", ".cache") == str(tmp_path / ".cache")


def test_ask_reads_a_line_at_a_time_then_ends() -> None:
    term = terminal({}, Path("/"), "yes\nno")
    assert (term.ask("one? "), term.ask("two? ")) == ("yes", "no")
    with pytest.raises(EOFError):
        term.ask("three? ")
    assert output(term) == "one? two? three? "
    assert not term.interactive()


def test_help_and_usage_errors_go_to_the_terminals_streams(tmp_path: Path) -> None:
    term = terminal({}, tmp_path)
    assert main(["task", "add"], term) == 2  # TITLE missing
    assert isinstance(term.stderr, io.StringIO)
    assert "the following arguments are required" in term.stderr.getvalue()
    assert output(term) == ""
    term = terminal({}, tmp_path)
    assert main(["--help"], term) == 0
    assert "exit codes:" in output(term)
    # each command line has its own: nothing of one stays behind for the next
    assert Parser.terminal is None and Parser.json_errors is False
    json_term = terminal({}, tmp_path)
    assert main(["task", "add", "--json"], json_term) == 2
    assert '"code":"usage"' in output(json_term)
    assert isinstance(term.stderr, io.StringIO)
    assert term.stderr.getvalue() == ""  # the --help run's stderr got nothing of it


@pytest.mark.parametrize(
    ("argv", "env_socket", "code"),
    [
        (["init", "."], None, 2),
        (["--json", "repos"], "rel.sock", 2),
        (["--repo", "/", "prd", "import", "p.json"], None, 1),  # its own "cannot read"
    ],
)
def test_a_relative_path_without_a_working_directory_is_a_clear_error(
    daemon: DaemonProcess, argv: list[str], env_socket: str | None, code: int
) -> None:
    """Where the working directory was deleted, a relative path (a repository, the socket,
    a file to read) is an error that says so, not an internal one."""
    env = dict(daemon.env, POKERALPH_SOCKET=env_socket or str(daemon.socket))
    term = Terminal(env, None, io.StringIO(), io.StringIO(), io.StringIO())
    assert main(argv, term) == code
    assert isinstance(term.stderr, io.StringIO)
    said = output(term) + term.stderr.getvalue()
    assert "the working directory no longer exists" in said and "internal" not in said
