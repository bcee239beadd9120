"""``pokeralphctl`` and seed 003's phases: setting them, and what ``battle show``,
``battle history`` and ``battle report`` print of phases, cycles and reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.conftest import Ctl, envelope
from tests.helpers import FAKES, DaemonProcess, events_of


def test_config_set_phases_and_roles(ctl: Ctl) -> None:
    proc = ctl("config", "set", "phases", "implementation,verification,review")
    assert proc.returncode == 0, proc.stderr
    got = envelope(ctl("config", "get", "phases", "--json"))["result"]
    assert got["value"] == ["implementation", "verification", "review"]
    proc = ctl("config", "set", "phases", '["implementation"]')
    assert proc.returncode == 0 and "implementation" in proc.stdout
    bad = ctl("config", "set", "phases", "implementation,release", "--json")
    error = json.loads(bad.stdout)["error"]
    assert bad.returncode != 0 and error["data"]["field"].startswith("phases")
    bad = ctl("config", "set", "phases", "review,implementation")
    assert bad.returncode != 0 and "must start with implementation" in bad.stderr
    # a role's agent, its snake_case fields camel-cased, its env kept as strings
    assert ctl("config", "set", "roles.reviewer.backend", "codex").returncode == 0
    assert ctl("config", "set", "roles.reviewer.extra_args", '["--x"]').returncode == 0
    assert ctl("config", "set", "roles.reviewer.env.DEBUG", "1").returncode == 0
    assert ctl("config", "set", "max_review_cycles", "3").returncode == 0
    config = envelope(ctl("config", "get", "--json"))["result"]["config"]
    reviewer = config["roles"]["reviewer"]
    assert (reviewer["backend"], reviewer["extraArgs"], reviewer["env"]) == (
        "codex",
        ["--x"],
        {"DEBUG": "1"},
    )
    assert config["maxReviewCycles"] == 3


def test_show_history_and_report_print_phases_and_reports(
    ctl: Ctl, daemon: DaemonProcess, registered: Path, home: Path
) -> None:
    script = home / "verifier.json"
    script.write_text(json.dumps(["request_changes", "approve"]))
    patch = {
        "agent": {"backend": "claude", "command": str(FAKES / "fake_claude")},
        "mode": "yolo",
        "feedbackLoops": ["test"],
        "feedbackCommands": {"test": "true"},
        "roles": {
            "verifier": {
                "backend": "claude",
                "command": str(FAKES / "fake_reviewer"),
                "env": {"FAKE_REVIEWER_SCRIPT": str(script)},
            }
        },
    }
    daemon.call("config.update", {"repo": str(registered), "patch": patch})
    ctl("task", "add", "Make it work", "-d", "d", "-c", "work.txt exists")
    task = "001-make-it-work"
    with daemon.connect(timeout=60) as conn:
        conn.call("events.subscribe", {"repo": str(registered)})
        assert ctl("battle", "start", task).returncode == 0
        list(events_of(conn, lambda e: e["type"] == "battle_complete"))
    shown = ctl("battle", "show", task)
    assert shown.returncode == 0, shown.stderr
    assert "phase:       done (of implementation, verification)" in shown.stdout
    assert "verification: 2/3 cycles, last approve" in shown.stdout
    past = ctl("battle", "history", task)
    assert past.returncode == 0, past.stderr
    assert re.search(r"verification\s+1\s+request_changes\s+no\s+1\s+1 \(1\)", past.stdout)
    assert re.search(r"verification\s+2\s+approve\s+yes", past.stdout)
    assert "FINDING-1" in past.stdout and "battle report" in past.stderr
    first = ctl("battle", "report", task, "verification", "--cycle", "1")
    assert first.returncode == 0, first.stderr
    assert "verification report 1 of 001-make-it-work: request_changes" in first.stdout
    assert "failed work.txt exists: FINDING-1" in first.stdout
    assert "[critical] work.txt:1 FINDING-1" in first.stdout
    latest = envelope(ctl("battle", "report", task, "verification", "--json"))["result"]
    assert latest["report"]["cycle"] == 2 and latest["report"]["recommendation"] == "approve"
    missing = ctl("battle", "report", task, "review")
    assert missing.returncode != 0 and "no review report" in missing.stderr
