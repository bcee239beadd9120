"""The start-up guard: common commands import only the standard library and pokeralphctl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DaemonProcess

FORBIDDEN = {"msgspec", "pydantic", "anyio", "asyncio", "git", "platformdirs", "psutil"}
FORBIDDEN |= {"pokeralphd", "pokeralph_agent"}  # (pokeralph-acp shares this list: tests/acp)
# the shared core's standard-library-only modules: the rest of it loads pydantic (issue 22)
STDLIB_CORE = {"pokeralph_core", "pokeralph_core.paths", "pokeralph_core.weblink"}
FORBIDDEN |= {"textual", "rich"}  # the `tui` extra: `pokeralphctl tui` alone imports it

# Runs the CLI's main() on each command line in turn (a JSON list, the second argument)
# in one fresh interpreter, and writes each one's exit code and the modules imported by
# then to the file named by the first. Modules only pile up, so the first line to import
# a forbidden one is the one to blame.
PROBE = """
import json, sys
from pokeralphctl.cli import main
out, runs = sys.argv[1], json.loads(sys.argv[2])
after = []
for args in runs:
    code = main(args)
    after.append({"code": code, "modules": sorted(sys.modules)})
with open(out, "w") as fh:
    json.dump(after, fh)
"""


def forbidden(modules: list[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in FORBIDDEN
        or (m.split(".")[0] == "pokeralph_core" and m not in STDLIB_CORE)
    )


def imported(
    env: dict[str, str], tmp: Path, runs: list[list[str]], cwd: Path | None = None
) -> list[tuple[int, list[str]]]:
    """Each command line's exit code and what had been imported once it ran."""
    out = tmp / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), json.dumps(runs)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.exists(), proc.stderr
    after = json.loads(out.read_text())
    assert len(after) == len(runs)
    return [(int(run["code"]), list(run["modules"])) for run in after]


COMMON_PATHS = [
    ["status"],
    ["--json", "status"],
    ["ping"],
    ["battle", "start", "001-task", "--yolo"],
    ["battle", "approve", "--note", "ok"],
    ["approve", "--reject"],
    ["task", "list"],
    ["task", "add", "T", "-d", "d", "-c", "c"],
    ["config", "get", "agent.backend"],
    ["repos"],
    ["daemon", "status"],
    ["inbox"],
    ["watch", "--help"],
    ["--help"],
]


def test_common_paths_import_only_the_standard_library(
    daemon: DaemonProcess, repo: Path, tmp_path: Path
) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    after = imported(daemon.env, tmp_path, COMMON_PATHS, cwd=repo)
    for args, (_, modules) in zip(COMMON_PATHS, after, strict=True):
        assert forbidden(modules) == [], f"pokeralphctl {' '.join(args)}"


def test_no_daemon_path_and_every_command_module_stay_light(tmp_path: Path) -> None:
    env = dict(os.environ, POKERALPH_SOCKET=str(tmp_path / "none.sock"))
    env["POKERALPH_NO_AUTOSTART"] = "1"  # nothing answers, and nothing may be started
    ((exit_code, modules),) = imported(env, tmp_path, [["status"]])
    assert exit_code == 3 and forbidden(modules) == []  # 3: no daemon
    code = "import json, pkgutil, sys, importlib, pokeralphctl.commands as c\n"
    code += "for m in pkgutil.iter_modules(c.__path__): importlib.import_module(c.__name__ + '.' + m.name)\n"
    code += "print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)
    assert "pokeralphctl.commands.watch" in modules
    assert "pokeralphctl.commands.tui" in modules  # the tui command's module is light too
    assert forbidden(modules) == []


def test_importtime_of_status_json(daemon: DaemonProcess) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pokeralphctl", "status", "--json"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True
    names = [
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "pokeralphctl.cli" in names
    assert "pokeralph_core.paths" in names  # the socket is found by the shared module
    assert forbidden(names) == []


QUICK_LINES = [
    ["status"],
    ["ping"],
    ["--json", "status"],
    ["status", "--json"],
    ["-v", "status"],
    ["status", "-v", "--verbose"],
    ["-v", "-v", "status", "-v"],  # the subcommand's count replaces the one before it
    ["--repo", "r", "status", "--repo", "/x/y"],
    ["--socket", "/s", "--no-autostart", "ping", "--socket", "/t", "--json"],
    ["--repo", "status", "ping"],  # "status" is --repo's value here
    ["ping", "--no-autostart", "--repo", "."],
]
NOT_QUICK = [
    [],
    ["--json"],
    ["status", "extra"],
    ["status", "status"],
    ["status", "--help"],
    ["-h", "status"],
    ["--version"],
    ["status", "--repo"],
    ["status", "--repo", "-v"],
    ["status", "--repo=x"],
    ["status", "--js"],
    ["status", "-vv"],
    ["--", "status"],
    ["repos"],
    ["task", "list"],
]
ATTRS = ("command", "handler", "json", "no_autostart", "repo", "socket", "verbose")


@pytest.mark.parametrize("argv", QUICK_LINES)
def test_quick_args_parse_as_argparse_does(argv: list[str]) -> None:
    from pokeralphctl.cli import build_parser, quick_args

    quick = quick_args(argv)
    assert quick is not None
    parsed = build_parser(argv)[0].parse_args(argv)
    for attr in ATTRS:
        assert getattr(quick, attr) == getattr(parsed, attr), attr


@pytest.mark.parametrize("argv", NOT_QUICK)
def test_anything_else_goes_to_argparse(argv: list[str]) -> None:
    from pokeralphctl.cli import quick_args

    assert quick_args(argv) is None


def test_status_and_ping_skip_argparse(daemon: DaemonProcess, tmp_path: Path) -> None:
    runs = [["status"], ["--json", "status", "-v"], ["ping", "--json"]]
    for args, (code, modules) in zip(runs, imported(daemon.env, tmp_path, runs), strict=True):
        assert code == 0, args  # each ran to its end
        assert not {"argparse", "shutil", "gettext", "pokeralphctl.parsing"} & set(modules)


# Hides the `tui` extra from one interpreter (as if it were not installed), then runs the CLI.
WITHOUT_EXTRA = """
import sys
sys.modules["textual"] = None  # import textual now fails: ModuleNotFoundError, name "textual"
from pokeralphctl.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_tui_without_the_extra_names_the_extra(tmp_path: Path) -> None:
    env = dict(os.environ, POKERALPH_SOCKET=str(tmp_path / "none.sock"))
    env["POKERALPH_NO_AUTOSTART"] = "1"
    for args, stream in ((["tui"], "stderr"), (["--json", "tui"], "stdout")):
        proc = subprocess.run(
            [sys.executable, "-c", WITHOUT_EXTRA, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        said = getattr(proc, stream)
        assert "optional extra `tui`" in said and "pip install 'pokeralph[tui]'" in said, said
        assert "Traceback" not in proc.stderr


def test_tui_needs_a_terminal(tmp_path: Path) -> None:
    """With the extra installed but no terminal (a script, CI), a usage error, not a hang."""
    env = dict(os.environ, POKERALPH_SOCKET=str(tmp_path / "none.sock"))
    proc = subprocess.run(
        [sys.executable, "-m", "pokeralphctl", "tui"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "needs a terminal" in proc.stderr, proc.stderr


def test_only_the_tui_package_imports_the_extra() -> None:
    """Statically: Textual and Rich appear in pokeralphctl/tui/ only, and not in the parts
    that run without them (the package's ``__init__``, its protocol adapter, its board);
    ``commands/tui.py`` reaches the app inside its handler only."""
    import ast

    root = Path(__file__).resolve().parents[2] / "pokeralphctl"
    light = {"tui/__init__.py", "tui/link.py", "tui/board.py"}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            extra = [n for n in names if n.split(".")[0] in ("textual", "rich")]
            assert not extra or (rel.startswith("tui/") and rel not in light), (rel, extra)
            if rel == "commands/tui.py" and "pokeralphctl.tui.app" in names:
                assert node not in tree.body, "commands/tui.py imports the app at its top"
