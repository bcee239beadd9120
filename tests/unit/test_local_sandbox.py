"""The working directory is the boundary: no path, however written, resolves outside it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pokeralph_agent.errors import PathEscape, ToolError
from pokeralph_agent.sandbox import Sandbox
from tests.helpers import short_tmpdir


@pytest.fixture(scope="module")
def tree() -> Iterator[Path]:
    """``outside/secret``, ``outside/work`` (the root) with links in and out of it."""
    base = short_tmpdir()
    (base / "secret").write_text("s")
    work = base / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("a")
    (work / "out").symlink_to(base)
    (work / "secret-link").symlink_to(base / "secret")
    (work / "in-link").symlink_to(work / "src")
    (work / "loop").symlink_to(work / "loop")
    yield work
    import shutil

    shutil.rmtree(base, ignore_errors=True)


def test_paths_inside_resolve(tree: Path) -> None:
    box = Sandbox(tree)
    assert box.resolve("src/a.py") == tree / "src" / "a.py"
    assert box.resolve("./src/../src/a.py") == tree / "src" / "a.py"
    assert box.resolve(str(tree / "src")) == tree / "src"  # absolute, but inside
    assert box.resolve("") == box.resolve(".") == tree
    assert box.resolve("in-link/a.py") == tree / "src" / "a.py"  # a link that stays in
    assert box.resolve("new/dir/file.txt") == tree / "new" / "dir" / "file.txt"
    assert box.relative(tree) == "." and box.relative(tree / "src" / "a.py") == "src/a.py"


@pytest.mark.parametrize(
    "path",
    ["..", "../secret", "src/../../secret", "/etc/passwd", "/", "out/secret", "secret-link",
     "out", "~", "~/x", "out/work/../secret"],
)  # fmt: skip
def test_escapes_are_refused(tree: Path, path: str) -> None:
    with pytest.raises(PathEscape, match="outside the working directory"):
        Sandbox(tree).resolve(path)


def test_odd_paths_are_errors_not_crashes(tree: Path) -> None:
    box = Sandbox(tree)
    with pytest.raises(ToolError, match="NUL"):
        box.resolve("a\0b")
    with pytest.raises(ToolError, match="string"):
        box.resolve(3)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="at most"):
        box.resolve("a/" * 3000)
    box.resolve("loop")  # a link to itself resolves to itself: inside


SEGMENTS = st.sampled_from(["..", ".", "src", "out", "secret-link", "in-link", "a.py", "", "x"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(SEGMENTS, min_size=1, max_size=8),
    st.booleans(),
    st.text(alphabet="./\\~ab", max_size=12),
)
def test_no_path_resolves_outside(tree: Path, parts: list[str], absolute: bool, junk: str) -> None:
    box = Sandbox(tree)
    for candidate in ("/".join(parts), junk, ("/" if absolute else "") + "/".join(parts) + junk):
        if absolute and candidate.startswith("/"):
            candidate = str(tree) + candidate
        try:
            real = box.resolve(candidate)
        except ToolError:
            continue
        assert real == tree or tree in real.parents, (candidate, real)
        assert os.path.realpath(real) == str(real)
