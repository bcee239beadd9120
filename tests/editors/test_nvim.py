"""The Neovim plugin (editors/nvim) in a real headless Neovim against a real daemon.

Each scenario is a Lua script (tests/editors/nvim/) run by ``nvim --headless -u NONE``
with the plugin root on 'runtimepath', as a plugin manager would put it; it writes what
it found as JSON (tests/editors/nvim/harness.lua). The daemon is a real ``pokeralphd``
process running the demo agent in a sample repository. Skipped only when no ``nvim``
binary can be found (``.ci/run`` installs Debian's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DaemonProcess, make_git_repo, wait_until

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"
SCENARIOS = Path(__file__).resolve().parent / "nvim"
TASK = "001-implement-text-statistics"
NVIM = shutil.which("nvim")

pytestmark = pytest.mark.skipif(
    NVIM is None, reason="no nvim binary on PATH (install Debian's neovim package)"
)


def sample_repo(path: Path) -> tuple[Path, dict[str, Any]]:
    """The demo's sample as a git repository; its PRD."""
    sample = resources.files("pokeralphd.demo") / "sample"
    files: dict[str, str] = {".gitignore": "__pycache__/\n"}
    prd: dict[str, Any] = {}
    for item in sample.iterdir():
        if item.name == "PRD.json":
            prd = json.loads(item.read_text())
        elif item.is_file() and not item.name.endswith(".pyc"):
            files[item.name] = item.read_text()
    return make_git_repo(path, files), prd


@pytest.fixture
def demo(home: Path) -> Iterator[tuple[DaemonProcess, Path]]:
    """A daemon process and a registered sample repository run by the demo agent."""
    daemon = DaemonProcess(home).start()
    try:
        repo, prd = sample_repo(home / "textstats")
        daemon.call("repo.register", {"path": str(repo)})
        daemon.call("prd.update", {"repo": str(repo), "prd": prd})
        daemon.call(
            "config.update",
            {
                "repo": str(repo),
                "patch": {
                    "agent": {"backend": "demo", "extraArgs": ["--pace", "0"]},
                    "mode": "hitl",
                    "maxIterationsPerTask": 5,
                    "feedbackLoops": ["test"],
                    "feedbackCommands": {"test": f"{sys.executable} -m unittest -q"},
                },
            },
        )
        yield daemon, repo
    finally:
        if daemon.running():
            daemon.stop()


def start_nvim(
    scenario: str, environ: dict[str, str], repo: Path, work: Path
) -> subprocess.Popen[str]:
    """Neovim running a scenario in ``environ`` (a daemon's: its socket)."""
    work.mkdir(exist_ok=True)
    for lua in SCENARIOS.glob("*.lua"):
        shutil.copy(lua, work / lua.name)
    env = dict(environ)
    env.update(
        {
            "PR_TEST_DIR": str(work),
            "PR_TEST_OUT": str(work / "result.json"),
            "PR_TEST_REPO": str(repo),
            "PR_TEST_TASK": TASK,
            "HOME": str(work),
        }
    )
    assert NVIM is not None
    return subprocess.Popen(
        [
            NVIM,
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "--cmd",
            f"set rtp^={PLUGIN}",
            "-c",
            f"luafile {work / scenario}",
        ],
        env=env,
        cwd=str(repo),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str], work: Path, timeout: float = 120) -> dict[str, Any]:
    """Wait for the scenario's end; its report (failing with what it said if it failed)."""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        raise AssertionError(f"nvim did not finish in {timeout}s:\n{output}") from None
    result_file = work / "result.json"
    assert result_file.exists(), f"nvim wrote no result (exit {proc.returncode}):\n{output}"
    report: dict[str, Any] = json.loads(result_file.read_text())
    assert report["ok"], (
        f"{report['error']}\nmessages: {report['messages']}\n"
        + "".join(f"--- {name}\n{text}\n" for name, text in report["buffers"].items())
        + output
    )
    return report


def messages(report: dict[str, Any]) -> list[str]:
    return [str(m["msg"]) for m in report["messages"]]


def test_a_demo_battle_from_the_editor(demo: tuple[DaemonProcess, Path], home: Path) -> None:
    daemon, repo = demo
    work = home / "nvim"
    report = finish(start_nvim("battle.lua", daemon.env, repo, work), work)
    checks = report["checks"]
    said = messages(report)
    # the statusline: off until connected, then the figures (nothing runs yet)
    assert checks["statusline_before"] in ("PR off", "PR …")
    assert checks["statusline_idle"] == "PR 0 running | 0 waiting | $0.00"
    assert (
        checks["statusline_waiting"].startswith("PR ")
        and "1 waiting" in checks["statusline_waiting"]
    )
    assert checks["complete_sub"] == ["follow"]
    assert checks["complete_task"] == [TASK]
    assert any(TASK in m and "pending" in m for m in said)
    # the agent's output arrived live, then the battle ran to its end
    assert "── iteration 1 ──" in checks["follow_first"]
    assert "DEMO" in checks["follow_first"] or "→ " in checks["follow_first"]
    assert "battle complete" in checks["follow_done"]
    history = daemon.call("battle.history", {"repo": str(repo), "taskId": TASK})
    assert history["battle"]["status"] == "completed"
    # the approval's note went into the next iteration's prompt
    assert history["battle"]["iterations"][1]["approvalNote"] == "keep going"
    # the select item: prompted with its schema, answered with the chosen option
    assert checks["select_answered"] is True
    assert "Pick a name" in checks["select_prompt"]
    assert checks["select_item"]["feedback"][0]["values"] == {"value": "beta"}
    # a confirm item picked from the inbox: its own labels offered, the second is "no"
    assert checks["confirm_items"] == ["Ship", "Wait"]
    assert checks["confirm_item"]["feedback"][0]["values"] == {"value": False}
    # the form: "many" refused by the daemon (its error shown), asked again, then taken
    assert checks["form_answered"] is True
    assert checks["form_item"]["feedback"][0]["values"] == {
        "values": {"count": 3, "why": "because"}
    }
    assert any("count must be a number" in m and "asking again" in m for m in said), said
    assert checks["diff_filetype"] == "diff"
    health = checks["health"]
    for expected in (
        "answers",
        "protocol version",
        "every method the plugin uses is there",
        "is registered as",
    ):
        assert expected in health, health
    assert "ERROR" not in health, health
    assert checks["client"] == {"status": "up", "connects": 1}
    assert not [m for m in report["messages"] if m["level"] == 4 and "asking again" not in m["msg"]]


def test_reconnects_and_resumes_after_a_restart(
    demo: tuple[DaemonProcess, Path], home: Path
) -> None:
    daemon, repo = demo
    work = home / "nvim"
    proc = start_nvim("restart.lua", daemon.env, repo, work)
    again: DaemonProcess | None = None
    try:
        wait_until(lambda: (work / "ready").exists() or proc.poll() is not None, 60, "ready")
        if proc.poll() is None:
            daemon.kill9()  # dead: the socket file stays, refusing connections
            (work / "killed").write_text("")
            wait_until(
                lambda: (work / "down-checked").exists() or proc.poll() is not None,
                60,
                "the editor to see the daemon gone",
            )
            again = DaemonProcess(home).start()
            (work / "restarted").write_text("")
        report = finish(proc, work)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if again is not None and again.running():
            again.stop()
    checks = report["checks"]
    # the same daemon: the event published while away was replayed, once
    resumed = checks["resumed"]
    assert resumed["epoch_same"] and resumed["replayed"] >= 1 and resumed["deliveries"] == 1
    # the daemon dead: one message for the outage and one for the command, whatever the retries
    down = checks["while_down"]
    assert down["attempts"] >= 3
    texts = [m["msg"] for m in down["messages"]]
    assert [t for t in texts if "lost the connection" in t] == [texts[-2]]
    assert "is not running" in texts[-1] and "pokeralphctl daemon start" in texts[-1]
    assert checks["statusline_down"] == "PR off"
    # the new daemon: found, the restart said once, its battle followed
    said = messages(report)
    assert said.count("pokeralph: connected to pokeralphd again") == 1
    assert sum("the daemon restarted" in m for m in said) == 1
    assert "── the daemon restarted; events from before are not replayed ──" in checks["follow"]
    assert "── iteration 1 ──" in checks["follow"]
    assert checks["after"] == {"status": "up", "connects": 3}


@pytest.mark.parametrize(
    "case", ["env", "explicit", "private-xdg", "shared-xdg", "relative-xdg", "no-xdg"]
)
def test_the_units_and_the_socket_found_as_pokeralphctl_finds_it(home: Path, case: str) -> None:
    """Framing bounds, socket file checks and schema prompts; and the socket path the
    plugin computes is pokeralphctl's in each kind of environment (asked of a process
    started in it: the temp dir is read from the process's own environment)."""
    xdg = home / "xdg"
    xdg.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("POKERALPH_SOCKET", "XDG_RUNTIME_DIR")}
    env["TMPDIR"] = str(home)
    explicit = None
    if case == "env":
        env["POKERALPH_SOCKET"] = f"  {home}/s.sock "
    elif case == "explicit":
        explicit = str(home / "explicit.sock")
        env["PR_TEST_EXPLICIT"] = explicit
    elif case == "private-xdg":
        env["XDG_RUNTIME_DIR"] = str(xdg)
    elif case == "shared-xdg":
        xdg.chmod(0o755)  # others may read it: not a runtime dir
        env["XDG_RUNTIME_DIR"] = str(xdg)
    elif case == "relative-xdg":
        env["XDG_RUNTIME_DIR"] = "relative/dir"
    work = home / "nvim"
    report = finish(start_nvim("units.lua", env, home, work), work)
    checks = report["checks"]
    expected = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pokeralph_core.paths import socket_path; "
            "print(socket_path(sys.argv[1] or None))",
            explicit or "",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert checks["socket"] == expected
    assert checks["lines"] == ['{"a":1}', '{"b":2}', '{"c":3}']
    assert checks["long"]["first"] == [] and checks["long"]["second"]
    assert "longer than 16 bytes" in checks["long"]["err"]
    assert "longer than 16 bytes" in checks["long_line"]
    assert "symbolic link" in checks["link_refused"]
    assert checks["own_file"] == "ok"
    assert checks["answers"] == [
        {"value": True},
        "cancelled",
        {"value": ["c", "a"]},
        {"value": 4},
        {"value": 42},
        {"values": {"n": 2.5, "pick": "y", "ok": True}},
        {"values": {}},
    ]


def test_the_help_file_has_its_tags(home: Path) -> None:
    """``:helptags`` takes the help file (no duplicate tag) and finds its commands."""
    doc = home / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    assert NVIM is not None
    proc = subprocess.run(
        [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"helptags {doc}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text().splitlines()}
    for tag in ("pokeralph.txt", ":Pokeralph", ":Pokeralph-follow", "pokeralph-inbox"):
        assert tag in tags, sorted(tags)
