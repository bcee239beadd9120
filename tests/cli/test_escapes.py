"""Terminal injection: hostile titles, bodies, paths and agent output never reach the
terminal raw. Every human command prints them escaped; ``--json`` round-trips them exactly
(and escapes them too: a JSON envelope on a terminal is just as safe). The commands run
in-process through ``tests/cli/conftest.py``'s ``ctl``, whose output is encoded as a
pipe's (see :func:`tests.helpers.run_ctl`): a lone surrogate let through fails here as it
would there."""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pokeralphctl.commands.render import SUMMARIES, render
from pokeralphctl.output import Output, clean, dumps
from tests.cli.conftest import Ctl, envelope
from tests.helpers import DaemonProcess, make_git_repo, run_ctl

#: OSC (retitle the terminal, BEL-terminated), clear screen, a colour, a C1 CSI, the RTL
#: override and an isolate, NEL, NUL, DEL, a carriage return, a lone surrogate's cousin
#: (the 8-bit ST), and a form feed.
HOSTILE = (
    "T\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b2J\u202egnp.exe\u2066x\u0085y\x00z\x7f\rw\x9c\x0c!"
)
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
LINE_SEPARATORS = {"\u2028", "\u2029"}


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would obey: controls but newline and tab,
    DEL and C1 (including ESC and BEL), bidi controls, Unicode line separators."""
    return [
        c
        for c in text
        if (ord(c) < 0x20 and c not in "\n\t")
        or 0x7F <= ord(c) <= 0x9F
        or c in BIDI
        or c in LINE_SEPARATORS
    ]


def inert(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert unsafe(proc.stdout) == [], proc.stdout
    assert unsafe(proc.stderr) == [], proc.stderr
    return proc


# --------------------------------------------------------------------------- unit


def test_clean_shows_every_control_and_keeps_text() -> None:
    assert clean("plain é → ok") == "plain é → ok"
    assert clean("a\x1b]0;x\x07b") == "a\\x1b]0;x\\x07b"
    assert clean("\x9b\u202e\x00\x7f") == "\\x9b\\u202e\\x00\\x7f"
    assert clean("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert clean("one\r\ntwo\tthree\r", multiline=True) == "one\ntwo\tthree\\r"
    assert clean("\ud800") == "\\ud800"
    assert unsafe(clean(HOSTILE)) == [] and unsafe(clean(HOSTILE, multiline=True)) == []
    # our own colour codes survive when asked; anything else with ESC does not
    styled = "\x1b[1mbold\x1b[0m\x1b]0;t\x07"
    assert clean(styled, keep_sgr=True) == "\x1b[1mbold\x1b[0m\\x1b]0;t\\x07"


def test_json_escapes_what_json_leaves_raw_and_stays_exact() -> None:
    value = {"t": HOSTILE, HOSTILE: [HOSTILE, "\ud800"]}
    text = dumps(value)
    assert unsafe(text) == []
    assert json.loads(text) == value


def test_output_escapes_lines_tables_notes_and_errors() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    out = Output(stdout=stdout, stderr=stderr)
    out.line(HOSTILE)
    out.write(HOSTILE + "\n")
    out.table(["id", "title"], [["1", HOSTILE], [HOSTILE, "multi\nline"]])
    out.note(HOSTILE)
    out.error("failed", HOSTILE, None, HOSTILE)
    assert unsafe(stdout.getvalue()) == [] and unsafe(stderr.getvalue()) == []
    assert "multi\\nline" in stdout.getvalue()  # a cell stays on its line


def test_colour_output_keeps_only_its_own_colour_codes() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    env = os.environ.pop("NO_COLOR", None)
    try:
        out = Output(stdout=Tty(), stderr=Tty())
    finally:
        if env is not None:
            os.environ["NO_COLOR"] = env
    assert out.color
    out.table(["title"], [[HOSTILE], [out.style("ok", "green")]])
    out.line(out.style(clean(HOSTILE), "bold"))
    assert isinstance(out.stdout, io.StringIO)
    text = out.stdout.getvalue()
    assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text
    assert "\x1b[32mok\x1b[0m" in text  # our colour is still there


def hostile_event(kind: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        key: HOSTILE
        for key in (
            "reason",
            "error",
            "note",
            "message",
            "question",
            "title",
            "commitHash",
            "loop",
            "path",
            "mode",
            "id",
            "deliveryId",
        )
    }
    payload.update(
        task={"id": HOSTILE, "title": HOSTILE, "status": HOSTILE},
        delivery={"title": HOSTILE},
        prd={"name": HOSTILE},
        patch={HOSTILE: HOSTILE},
        changed=[HOSTILE],
        feedback={HOSTILE: True, "values": HOSTILE, "note": HOSTILE},
        chunks=[
            {"kind": kind, "text": HOSTILE + "\n" + HOSTILE}
            for kind in ("text", "tool_use", "tool_error", "notice", "tool_result", "stderr")
        ],
    )
    return {
        "seq": 1,
        "type": kind,
        "repo": HOSTILE,
        "taskId": HOSTILE,
        "payload": payload,
        "timestamp": HOSTILE,
    }


@pytest.mark.parametrize(
    "kind", [*SUMMARIES, "iteration_output", "planning_output", "a_new_type\x1b[2J"]
)
def test_every_event_line_is_escaped(kind: str) -> None:
    """What watch, battle start --follow and plan print for each event type."""
    out = Output(stdout=io.StringIO(), stderr=io.StringIO(), verbose=1)
    for prefix in (True, False):
        lines = render(out, hostile_event(kind), prefix=prefix)
        assert lines and all(unsafe(line) == [] for line in lines), lines


# --------------------------------------------------------------------------- a real daemon


def test_task_and_prd_commands(daemon: DaemonProcess, ctl: Ctl, registered: Path) -> None:
    description = f"first {HOSTILE}\nsecond\twith a tab"
    created = daemon.call(
        "task.create",
        {
            "title": HOSTILE,
            "description": description,
            "acceptanceCriteria": [HOSTILE],
            "repo": str(registered),
        },
    )
    task_id = created["task"]["id"]
    daemon.call(
        "prd.update",
        {
            "name": HOSTILE,
            "description": description,
            "metadata": {"originalIdea": HOSTILE},
            "repo": str(registered),
        },
    )
    for args in (
        ("task", "list"),
        ("task", "show", task_id),
        ("prd", "show"),
        ("prd", "set-description", "plain"),
    ):
        proc = inert(ctl(*args))
        assert proc.returncode == 0, proc.stderr
    shown = ctl("task", "show", task_id).stdout
    assert "\\x1b]0;pwned\\x07" in shown and "\\u202egnp.exe" in shown
    assert "  second\twith a tab" in shown  # a description keeps its lines and tabs

    listed = inert(ctl("task", "list", "--json"))
    assert envelope(listed)["result"]["tasks"][0]["title"] == HOSTILE
    task = envelope(inert(ctl("task", "show", task_id, "--json")))["result"]["task"]
    assert (task["title"], task["description"], task["acceptanceCriteria"]) == (
        HOSTILE,
        description,
        [HOSTILE],
    )
    prd = envelope(inert(ctl("prd", "show", "--json")))["result"]["prd"]
    assert prd["name"] == HOSTILE and prd["metadata"]["originalIdea"] == HOSTILE


def test_inbox_commands(daemon: DaemonProcess, ctl: Ctl, registered: Path) -> None:
    created = daemon.call(
        "inbox.create",
        {
            "title": HOSTILE,
            "body": f"{HOSTILE}\nmore",
            "schema": {"type": "select", "prompt": HOSTILE, "options": [HOSTILE, "b"]},
            "repo": str(registered),
        },
    )
    delivery_id = created["delivery"]["id"]
    for args in (("inbox",), ("inbox", "show", delivery_id), ("inbox", "--all")):
        proc = inert(ctl(*args))
        assert proc.returncode == 0, proc.stderr
    assert "\\x1b]0;pwned" in ctl("inbox").stdout
    # answering without a terminal fails, naming the schema (prompt and options) on stderr
    proc = inert(ctl("answer", delivery_id))
    assert proc.returncode == 1 and "\\u202e" in proc.stderr
    items = envelope(inert(ctl("inbox", "--json")))["result"]["items"]
    assert [item["title"] for item in items] == [HOSTILE]
    got = envelope(inert(ctl("inbox", "show", delivery_id, "--json")))["result"]
    assert got["delivery"]["content"]["body"] == f"{HOSTILE}\nmore"


AGENT = """#!{python}
import sys
sys.stdin.read()
print({hostile!r})
print({hostile!r}, file=sys.stderr)
print("done <promise>COMPLETE</promise>")
"""


def test_battle_follow_log_history_and_progress(
    daemon: DaemonProcess, ctl: Ctl, registered: Path, home: Path
) -> None:
    agent = home / "hostile-agent"
    agent.write_text(AGENT.format(python=sys.executable, hostile=HOSTILE))
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
    assert ctl("config", "set", "agent.backend", "command").returncode == 0
    assert ctl("config", "set", "agent.command", str(agent)).returncode == 0
    assert ctl("config", "set", "feedbackLoops", '["test"]').returncode == 0
    # this agent cannot verify its own work (it writes no report): no verification phase
    assert ctl("config", "set", "phases", "implementation").returncode == 0
    task_id = daemon.call(
        "task.create",
        {
            "title": HOSTILE,
            "description": "d",
            "acceptanceCriteria": ["c"],
            "repo": str(registered),
        },
    )["task"]["id"]

    proc = inert(ctl("battle", "start", task_id, "--yolo", "--max-iterations", "1", "--follow"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "\\x1b]0;pwned\\x07" in proc.stdout  # the agent's line, shown escaped

    for args in (
        ("battle", "log", task_id),
        ("battle", "log", task_id, "-n", "5"),
        ("battle", "history", task_id),
        ("battle", "show", task_id),
    ):
        proc = inert(ctl(*args))
        assert proc.returncode == 0, proc.stderr
    log = envelope(inert(ctl("battle", "log", task_id, "--json")))["result"]["data"]
    assert HOSTILE in log  # the exact bytes the agent wrote

    # battle start --follow --json: one exact event per line, none of them raw
    task2 = daemon.call(
        "task.create",
        {
            "title": "again",
            "description": "d",
            "acceptanceCriteria": ["c"],
            "repo": str(registered),
        },
    )["task"]["id"]
    proc = inert(ctl("battle", "start", task2, "--yolo", "--max-iterations", "1", "-f", "--json"))
    texts = [
        chunk["text"]
        for line in proc.stdout.splitlines()[1:]
        for chunk in (json.loads(line).get("payload") or {}).get("chunks") or []
    ]
    assert HOSTILE in texts


def test_watch_escapes_live_events(daemon: DaemonProcess, registered: Path) -> None:
    # a process: a watch runs until Ctrl-C (SIGINT), which reaches a process only
    watch = subprocess.Popen(
        [sys.executable, "-m", "pokeralphctl", "watch", "--repo", str(registered)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stderr is not None and watch.stdout is not None
        assert "watching" in watch.stderr.readline()  # subscribed
        daemon.call(
            "task.create",
            {
                "title": HOSTILE,
                "description": "d",
                "acceptanceCriteria": ["c"],
                "repo": str(registered),
            },
        )
        line = watch.stdout.readline()
        assert "task_created" in line and "\\x1b]0;pwned" in line
        assert unsafe(line) == []
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            watch.wait(30)
        finally:
            if watch.poll() is None:  # never left behind, even when Ctrl-C did not end it
                watch.kill()
                watch.wait()
            watch.stdout.close()  # type: ignore[union-attr]
            watch.stderr.close()  # type: ignore[union-attr]
    assert watch.returncode == 0


def test_status_and_repos_with_a_hostile_path(daemon: DaemonProcess, home: Path) -> None:
    repo = make_git_repo(home / "r\x1b]0;pwned\x07\u202e\x9b")
    assert daemon.call("repo.register", {"path": str(repo)})["path"] == str(repo)
    for args in (("status",), ("repos",), ("daemon", "status")):
        proc = inert(run_ctl(daemon.env, *args))
        assert proc.returncode == 0, proc.stderr
        assert "r\\x1b]0;pwned\\x07\\u202e\\x9b" in proc.stdout
    repos = envelope(inert(run_ctl(daemon.env, "repos", "--json")))["result"]
    assert [r["path"] for r in repos] == [str(repo)]
