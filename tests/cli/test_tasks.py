"""``task`` and ``prd`` commands against a real daemon, in human and ``--json`` modes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Ctl, envelope
from tests.helpers import DaemonProcess, run_ctl


def test_task_add_list_show_edit_rm(ctl: Ctl) -> None:
    proc = ctl("task", "add", "Login form", "-d", "A form", "-c", "has fields", "-c", "validates")
    assert proc.returncode == 0, proc.stderr
    assert "001-login-form" in proc.stdout
    added = envelope(
        ctl(
            "task",
            "add",
            "Logout",
            "--description",
            "d",
            "--criteria",
            "c",
            "--priority",
            "2",
            "--id",
            "007-out",
            "--json",
        )
    )
    assert added["ok"] is True
    assert added["result"]["task"]["id"] == "007-out"
    assert added["result"]["task"]["priority"] == 2

    listing = ctl("task", "list")
    assert listing.returncode == 0
    header, *rows = listing.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "PRIORITY", "TITLE"]
    assert rows[0].split()[:3] == ["001-login-form", "pending", "1"]
    assert rows[1].split() == ["007-out", "pending", "2", "Logout"]
    tasks = envelope(ctl("task", "list", "--json"))["result"]["tasks"]
    assert [t["id"] for t in tasks] == ["001-login-form", "007-out"]

    shown = ctl("task", "show", "001-login-form")
    assert "  - has fields" in shown.stdout and "  - validates" in shown.stdout
    task = envelope(ctl("task", "show", "001-login-form", "--json"))["result"]["task"]
    assert task["acceptanceCriteria"] == ["has fields", "validates"]

    proc = ctl("task", "edit", "001-login-form", "--title", "Login page", "-c", "only one")
    assert proc.returncode == 0, proc.stderr
    task = envelope(ctl("task", "show", "001-login-form", "--json"))["result"]["task"]
    assert task["title"] == "Login page" and task["acceptanceCriteria"] == ["only one"]
    assert ctl("task", "edit", "007-out", "--status", "in_progress").returncode == 0
    in_progress = envelope(ctl("task", "list", "--status", "in_progress", "--json"))["result"]
    assert [t["id"] for t in in_progress["tasks"]] == ["007-out"]

    proc = ctl("task", "rm", "007-out")
    assert proc.returncode == 0 and "removed 007-out" in proc.stdout
    assert envelope(ctl("task", "rm", "001-login-form", "--json"))["result"]["taskId"] == (
        "001-login-form"
    )
    assert "no tasks" in ctl("task", "list").stdout


def test_task_errors_say_what_to_do(ctl: Ctl) -> None:
    proc = ctl("task", "show", "999-missing")
    assert proc.returncode == 1
    assert "999-missing" in proc.stderr and "pokeralphctl task list" in proc.stderr
    assert envelope(ctl("task", "show", "999-missing", "--json"))["error"]["code"] == -32002
    ctl("task", "add", "A", "-d", "d", "-c", "c")
    proc = ctl("task", "edit", "001-a", "--status", "completed", "--json")
    assert proc.returncode == 1
    assert envelope(proc)["error"]["code"] == -32004
    proc = ctl("task", "edit", "001-a")
    assert proc.returncode == 2 and "nothing to change" in proc.stderr


def test_repo_by_name_from_elsewhere(daemon: DaemonProcess, registered: Path, home: Path) -> None:
    proc = run_ctl(daemon.env, "--repo", "repo", "task", "add", "T", "-d", "d", "-c", "c", cwd=home)
    assert proc.returncode == 0, proc.stderr
    proc = run_ctl(daemon.env, "task", "list", "--json", "--repo", str(registered / "."), cwd=home)
    assert [t["id"] for t in envelope(proc)["result"]["tasks"]] == ["001-t"]


def test_prd_show_rename_describe_import(ctl: Ctl, registered: Path) -> None:
    assert "no PRD yet" in ctl("prd", "show").stdout
    assert ctl("prd", "set-name", "Shop").returncode == 0
    assert ctl("prd", "set-description", "An online shop").returncode == 0
    ctl("task", "add", "Cart", "-d", "d", "-c", "c")
    shown = ctl("prd", "show")
    assert "Shop" in shown.stdout and "An online shop" in shown.stdout
    assert "001-cart" in shown.stdout
    prd = envelope(ctl("prd", "show", "--json"))["result"]["prd"]
    prd["name"] = "Imported"
    prd["tasks"].append({**prd["tasks"][0], "id": "002-checkout", "title": "Checkout"})
    path = registered.parent / "prd.json"
    path.write_text(json.dumps(prd))
    proc = ctl("prd", "import", str(path))
    assert proc.returncode == 0, proc.stderr
    prd = envelope(ctl("prd", "show", "--json"))["result"]["prd"]
    assert prd["name"] == "Imported"
    assert [t["id"] for t in prd["tasks"]] == ["001-cart", "002-checkout"]
    bad = registered.parent / "bad.json"
    bad.write_text("{nope")
    proc = ctl("prd", "import", str(bad))
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    proc = ctl("prd", "import", str(registered.parent / "missing.json"))
    assert proc.returncode == 1 and "cannot read" in proc.stderr
