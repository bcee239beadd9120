"""What a person is shown of a tool's input before approving it: all of it, or plainly
less, never something that reads as another command.

Pure. :func:`view` renders a text (a tool input as canonical JSON, the model's own
description of a call) for a person:

- its **full length** in characters, always;
- when it is longer than :data:`SHOWN`, its **head and its tail** with a marker line
  between them that says how many characters were left out and where
  (``… 39 characters not shown (characters 1,001 to 1,039 of 2,039) …``): the end of an
  input is where a padded command hides what it really does;
- **nothing that does not show**: a run of :data:`RUN_MIN` or more spaces is counted
  (``␠×2000``), and every character that would not show or would reorder what is shown
  (controls, format characters such as zero-width spaces and bidi overrides, line and
  paragraph separators, spaces other than U+0020, blank letters, variation selectors)
  is written ``<U+202E>`` (a run of one ``<U+200B>×500``); so are the view's own marks
  ``␠`` and ``…`` when the input has them, so the input cannot fake a marker.

The inbox item, the permission events, ``rules.test`` and the dashboard (which shows
the item as the daemon wrote it) all show this view. :func:`code_block` and
:func:`code_span` put a view into Markdown that nothing in it can close.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from pokeralph_core.approval import canonical

SHOWN = 2000  # characters of a text shown: the first half and the last half
RUN_MIN = 8  # a run of at least this many spaces is shown counted: ␠×N
SPACE_MARK = "␠"
CUT_MARK = "…"
#: Letters and symbols that render as nothing (Hangul fillers, the blank Braille cell,
#: the combining grapheme joiner) and variation selectors, which can carry hidden text.
BLANKS = frozenset(
    {0x034F, 0x115F, 0x1160, 0x2800, 0x3164, 0xFFA0}
    | set(range(0xFE00, 0xFE10))
    | set(range(0xE0100, 0xE01F0))
)
LEGEND_SPACES = f"{SPACE_MARK}×N: N spaces in a row"
LEGEND_HIDDEN = (
    "<U+XXXX>: a character that would not show (a control, zero-width, bidi or blank "
    f"character, or the view's own {SPACE_MARK} or {CUT_MARK})"
)


def hidden(char: str) -> bool:
    """Whether ``char`` is shown as ``<U+XXXX>``: it would not show as itself."""
    if char in (SPACE_MARK, CUT_MARK) or ord(char) in BLANKS:
        return True
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp") or (category == "Zs" and char != " ")


_RUNS = re.compile(rf"( {{{RUN_MIN},}})|(.)\2*", re.DOTALL)


def visible(text: str) -> tuple[str, set[str]]:
    """``text`` with space runs counted and hidden characters named, and the legends of
    what it used."""
    out: list[str] = []
    used: set[str] = set()
    for match in _RUNS.finditer(text):
        run = match.group()
        if match.group(1):
            out.append(f"{SPACE_MARK}×{len(run)}")
            used.add(LEGEND_SPACES)
        elif hidden(run[0]):
            out.append(f"<U+{ord(run[0]):04X}>" + (f"×{len(run)}" if len(run) > 1 else ""))
            used.add(LEGEND_HIDDEN)
        else:
            out.append(run)
    return "".join(out), used


@dataclass(frozen=True)
class InputView:
    """A text as a person is shown it (:func:`view`)."""

    length: int  # characters of the whole text
    head: str  # the text, or its first half, made visible
    tail: str  # "" when the whole text is in ``head``; else its last half, made visible
    cut: tuple[int, int] | None  # the characters left out, counted from 1, both included
    legend: tuple[str, ...]  # what the marks in head and tail mean

    @property
    def marker(self) -> str:
        """The line between head and tail ("" when nothing was cut)."""
        if self.cut is None:
            return ""
        first, last = self.cut
        return (
            f"{CUT_MARK} {last - first + 1:,} characters not shown (characters {first:,} to "
            f"{last:,} of {self.length:,}) {CUT_MARK}"
        )

    @property
    def text(self) -> str:
        """The view on lines of its own: the head, the marker, the tail. No line starts
        with a space, a backtick or a tilde unless the text itself does."""
        if self.cut is None:
            return self.head
        return f"{self.head}{CUT_MARK}\n{self.marker}\n{CUT_MARK}{self.tail}"

    @property
    def one_line(self) -> str:
        if self.cut is None:
            return self.head
        return f"{self.head}{CUT_MARK} [{self.marker}] {CUT_MARK}{self.tail}"

    @property
    def summary(self) -> str:
        """The length, and whether it is all shown: ``2,039 characters, 39 not shown``."""
        size = f"{self.length:,} character{'' if self.length == 1 else 's'}"
        if self.cut is None:
            return f"{size}, all shown"
        first, last = self.cut
        return f"{size}, {last - first + 1:,} not shown (characters {first:,} to {last:,})"


def view(text: str, shown: int = SHOWN) -> InputView:
    """``text`` for a person: whole when it has at most ``shown`` characters, else its
    first and last halves of ``shown`` and where the rest was."""
    if len(text) <= shown:
        head, used = visible(text)
        return InputView(len(text), head, "", None, tuple(sorted(used)))
    half = shown // 2
    rest = len(text) - (shown - half)
    head, used = visible(text[:half])
    tail, more = visible(text[rest:])
    return InputView(len(text), head, tail, (half + 1, rest), tuple(sorted(used | more)))


def json_text(value: Any) -> str:
    """A tool input as rules see it (the canonical JSON of
    :func:`pokeralph_core.approval.canonical`), or as near as JSON gets for what it
    cannot hold (NaN: still shown, never matched)."""
    try:
        return canonical(value)
    except (TypeError, ValueError):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


_FENCE_LINE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


def code_block(shown: InputView, lang: str = "text") -> str:
    """A view as a fenced Markdown block that nothing in it can close.

    The view of JSON has no line that starts with a fence: its first line starts with the
    JSON's first character, the others with ``…``. For any other text a line that would
    close the block is refused (a bug here, never a forged block)."""
    body = shown.text
    if _FENCE_LINE.search(body):
        raise ValueError("a line of this view would close its code block")
    return f"```{lang}\n{body}\n```"


def code_span(text: str, shown: int = 200) -> str:
    """``text`` on one line as inline Markdown code, its backticks unable to end it."""
    line = view(text, shown).one_line
    ticks = max((len(run) for run in re.findall("`+", line)), default=0) + 1
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{'`' * ticks}{pad}{line}{pad}{'`' * ticks}"
