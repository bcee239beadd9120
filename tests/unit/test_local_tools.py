"""The ten tools: what they do, what they refuse, and what they hold (bounded)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pokeralph_agent.errors import PathEscape, ToolError
from pokeralph_agent.output import MAX_OUTPUT, cap
from pokeralph_agent.sandbox import Sandbox
from pokeralph_agent.tools import Toolbox, glob_regex, html_text
from pokeralph_agent.toolspec import BY_NAME, READ_ONLY, TOOLS, check_arguments
from tests.helpers import pid_alive, wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def box(tmp_path: Path) -> Toolbox:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    (tmp_path / "README.md").write_text("# hello\nworld\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("hello\n")
    return Toolbox(Sandbox(tmp_path))


def test_the_catalog_is_the_seeds() -> None:
    assert [t.name for t in TOOLS] == [
        "create_file", "read_file", "replace_string_in_file", "list_dir", "file_search",
        "grep_search", "run_in_terminal", "terminal_last_command", "create_directory",
        "fetch_webpage",
    ]  # fmt: skip
    assert {
        "read_file", "list_dir", "file_search", "grep_search", "terminal_last_command",
    } == READ_ONLY  # fmt: skip
    assert {t.name for t in TOOLS if t.risk == "dangerous"} == {
        "replace_string_in_file", "run_in_terminal", "fetch_webpage",
    }  # fmt: skip
    for tool in TOOLS:
        schema = tool.schema()["function"]["parameters"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])


def test_arguments_are_checked_against_the_schema() -> None:
    spec = BY_NAME["read_file"]
    assert check_arguments(spec, {"path": "a", "start_line": None}) == {"path": "a"}
    for bad, message in [
        ([1], "must be a JSON object"),
        ({}, "needs the argument 'path'"),
        ({"path": 3}, "'path' must be a string"),
        ({"path": "a", "start_line": "2"}, "'start_line' must be a integer"),
        ({"path": "a", "start_line": True}, "must be a integer"),
        ({"path": "a", "start_line": 0}, "at least 1"),
        ({"path": "a", "mode": "x"}, "has no argument 'mode'"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_arguments(spec, bad)


async def test_create_read_and_replace(box: Toolbox, tmp_path: Path) -> None:
    made = await box.run("create_file", {"path": "pkg/new.py", "content": "x = 1\n"})
    assert made.files_affected == ["pkg/new.py"] and (tmp_path / "pkg" / "new.py").exists()
    with pytest.raises(ToolError, match="exists; pass overwrite"):
        await box.run("create_file", {"path": "pkg/new.py", "content": "y"})
    again = await box.run(
        "create_file", {"path": "pkg/new.py", "content": "y\n", "overwrite": True}
    )
    assert again.output.startswith("Replaced file")
    part = await box.run("read_file", {"path": "src/app.py", "start_line": 2, "end_line": 2})
    assert part.output == "    return 1\n"
    with pytest.raises(ToolError, match="occurs 2 times"):
        await box.run(
            "replace_string_in_file",
            {"path": "src/app.py", "old_string": "return 1", "new_string": "return 2"},
        )
    with pytest.raises(ToolError, match="not found"):
        await box.run(
            "replace_string_in_file", {"path": "src/app.py", "old_string": "nope", "new_string": ""}
        )
    done = await box.run(
        "replace_string_in_file",
        {
            "path": "src/app.py",
            "old_string": "def g():\n    return 1",
            "new_string": "def g():\n    return 2",
        },
    )
    assert "line 5" in done.output and done.files_affected == ["src/app.py"]
    assert (tmp_path / "src" / "app.py").read_text().endswith("return 2\n")


async def test_reading_refuses_what_is_not_text(box: Toolbox, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        await box.run("read_file", {"path": "blob.bin"})
    with pytest.raises(ToolError, match="does not exist"):
        await box.run("read_file", {"path": "missing.txt"})
    with pytest.raises(ToolError, match="is a directory"):
        await box.run("read_file", {"path": "src"})
    with pytest.raises(PathEscape):
        await box.run("read_file", {"path": "../x"})


async def test_writing_never_follows_a_planted_link(box: Toolbox, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    (tmp_path / "trap.txt").symlink_to(outside)
    with pytest.raises(PathEscape):
        await box.run("create_file", {"path": "trap.txt", "content": "x", "overwrite": True})
    assert not outside.exists()


async def test_listing_and_searching(box: Toolbox) -> None:
    listing = await box.run("list_dir", {})
    assert listing.output.splitlines() == [".git/", "README.md", "src/"]
    found = await box.run("file_search", {"pattern": "**/*.py"})
    assert found.output == "src/app.py"
    with pytest.raises(ToolError, match=r"without \.\."):
        await box.run("file_search", {"pattern": "../**"})
    hits = await box.run("grep_search", {"query": "hello"})
    assert hits.output == "README.md:1: # hello"  # .git is not searched
    regex = await box.run(
        "grep_search", {"query": r"return \d", "is_regex": True, "include_pattern": "*.py"}
    )
    assert regex.output.splitlines() == ["src/app.py:2:     return 1", "src/app.py:6:     return 1"]
    with pytest.raises(ToolError, match="not a valid regular expression"):
        await box.run("grep_search", {"query": "(", "is_regex": True})


def test_globs() -> None:
    assert glob_regex("**/*.py").fullmatch("a/b/c.py") and glob_regex("**/*.py").fullmatch("c.py")
    assert glob_regex("src/*.py").fullmatch("src/a.py")
    assert not glob_regex("src/*.py").fullmatch("src/b/a.py")
    assert glob_regex("*.md").fullmatch("docs/x.md")  # a bare name matches at any depth
    assert glob_regex("test_[ab].py").fullmatch("test_a.py")


async def test_a_command_reports_its_exit_status_and_is_remembered(box: Toolbox) -> None:
    failed = await box.run("run_in_terminal", {"command": "echo out; echo err >&2; exit 3"})
    assert not failed.success and failed.error == "the command ended with exit status 3"
    assert "out\nerr\n" in failed.output and failed.output.endswith("[exit status 3]")
    assert failed.metadata["exit_code"] == 3
    last = await box.run("terminal_last_command", {})
    assert "echo out" in last.output and "exit status 3" in last.output


async def test_a_command_past_its_timeout_is_ended_with_its_group(
    box: Toolbox, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="must be a integer"):  # the model's calls: whole
        check_arguments(BY_NAME["run_in_terminal"], {"command": "x", "timeout_seconds": 0.5})
    pidfile = tmp_path / "pid"
    began = time.monotonic()
    done = await box.run(
        "run_in_terminal",
        # a fraction of a second: the toolbox takes one (a model's call gives whole seconds)
        {"command": f"sleep 60 & echo $! > {pidfile}; wait", "timeout_seconds": 0.5},
    )
    assert time.monotonic() - began < 10
    assert not done.success and done.error == "the command was stopped after the 0.5 s timeout"
    child = int(pidfile.read_text())
    # killed with its group; init reaps it when it gets to it
    wait_until(lambda: not pid_alive(child), 5, "the command's child to be gone")


async def test_a_50_kb_output_is_capped_with_a_note(box: Toolbox) -> None:
    done = await box.run("run_in_terminal", {"command": "python3 -c \"print('y' * 50000)\""})
    shown = cap(done.output, keep=done.keep)
    assert shown.truncated and len(shown.text.encode()) <= MAX_OUTPUT
    assert "output truncated" in shown.text and shown.text.endswith("[exit status 0]")


def test_capping_keeps_what_is_asked_for() -> None:
    text = "".join(f"line {n}\n" for n in range(5000))
    for keep in ("head", "tail", "both"):
        shown = cap(text, keep=keep)
        assert len(shown.text.encode()) <= MAX_OUTPUT and shown.total_lines == 5000
        assert ("line 0\n" in shown.text) == (keep != "tail")
        assert ("line 4999" in shown.text) == (keep != "head")
    assert cap("short").text == "short"
    assert len(cap("é" * 20000).text.encode()) <= MAX_OUTPUT  # never a cut character


async def test_fetch_is_off_unless_enabled(box: Toolbox) -> None:
    with pytest.raises(ToolError, match="disabled"):
        await box.run("fetch_webpage", {"url": "http://127.0.0.1:1/"})
    assert html_text("<p>a &amp; b</p><script>x()</script>") == "a & b"


async def test_create_directory(box: Toolbox, tmp_path: Path) -> None:
    made = await box.run("create_directory", {"path": "a/b/c"})
    assert made.files_affected == ["a/b/c"] and (tmp_path / "a" / "b" / "c").is_dir()
    with pytest.raises(ToolError, match="not a directory"):
        await box.run("create_directory", {"path": "README.md"})
