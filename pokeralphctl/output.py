"""What the CLI prints: the ``--json`` envelope, human text, colours, tables, error hints.

Human output goes to stdout, diagnostics to stderr. With ``--json`` every command prints
exactly one envelope on stdout (streaming commands print one JSON object per line)::

    {"ok": true, "result": ...}
    {"ok": false, "error": {"code": ..., "message": "...", "data": ...}}

``code`` is the daemon's JSON-RPC error code (an integer, named in
:mod:`pokeralphctl.codes`) when the daemon refused the request, or one of the strings
in :data:`CLIENT_CODES` for errors on the client side.
Colours are used only when the stream is a terminal and ``$NO_COLOR`` is unset.

Text that comes from the daemon (task titles, agent output, inbox items, config values)
may hold terminal escape sequences: a task or an agent could retitle or clear the user's
terminal. :func:`clean` is the one function that renders such characters visibly; every
human line goes through it on its way out (:class:`Output` applies it to everything it
writes), and the ``--json`` envelope escapes them as ``\\uXXXX`` so it stays exact.
"""

from __future__ import annotations

import json
import os
import sys

from pokeralphctl import codes

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    import re
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

#: Error codes of the client side, as they appear in a ``--json`` error envelope.
CLIENT_CODES = {
    "daemon_not_running": "Nothing answers on the socket (exit code 3).",
    "connection_lost": "The daemon closed the connection before answering (exit code 1).",
    "usage": "The command line is wrong (exit code 2).",
    "interrupted": "Interrupted with Ctrl-C (exit code 4).",
    "failed": "The command could not do what was asked (exit code 1).",
    "internal": "A bug in pokeralphctl (exit code 1).",
}

_STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}

STATUS_STYLES = {
    "pending": "dim",
    "queued": "dim",
    "planning": "blue",
    "in_progress": "cyan",
    "running": "cyan",
    "paused": "yellow",
    "awaiting_approval": "magenta",
    "completed": "green",
    "success": "green",
    "passed": "green",
    "failed": "red",
    "failure": "red",
    "timeout": "red",
    "cancelled": "yellow",
    "blocked": "yellow",
    "escalated": "magenta",
    "approve": "green",
    "request_changes": "red",
    "invalid": "red",
    "comment": "cyan",
}


def wants_color(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only for a terminal, and never when ``$NO_COLOR`` is set (no-color.org);
    ``environ`` is the environment to read (the process's by default)."""
    if "NO_COLOR" in (os.environ if environ is None else environ):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# --------------------------------------------------------------------------- control characters

#: Characters no human line prints raw: C0 controls (but tab and newline), DEL, C1 controls,
#: the bidirectional marks, embeddings, overrides and isolates, the Unicode line and
#: paragraph separators, and lone surrogates (which a terminal cannot even encode).
_UNSAFE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
    "\u2028\u2029\u2066-\u2069\ud800-\udfff"
)
#: what a colour code of ours looks like (SGR: ESC [ numbers m)
_SGR = "\x1b\\[[0-9;]*m"
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_patterns: dict[tuple[bool, bool], re.Pattern[str]] = {}


def _pattern(multiline: bool, keep_sgr: bool) -> re.Pattern[str]:
    key = (multiline, keep_sgr)
    pattern = _patterns.get(key)
    if pattern is None:
        import re  # only when a line needs it: most are printable ASCII (see clean)

        chars = f"[{_UNSAFE}]" if multiline else f"[\t\n{_UNSAFE}]"
        parts = (["\r\n"] if multiline else []) + ([_SGR] if keep_sgr else []) + [chars]
        pattern = _patterns[key] = re.compile("|".join(parts))
    return pattern


def _visible(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) > 1:  # one of ours (SGR), or CR LF in multi-line text
        return "\n" if text == "\r\n" else text
    if text in _NAMED:
        return _NAMED[text]
    code = ord(text)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: Any, *, multiline: bool = False, keep_sgr: bool = False) -> str:
    """``text`` safe to print on a terminal: control characters shown, never obeyed.

    ESC becomes ``\\x1b``, BEL ``\\x07``, a C1 control ``\\x9b``, a bidi override
    ``\\u202e``; tab and newline become ``\\t`` and ``\\n`` unless ``multiline`` (logs,
    descriptions), where they are kept (and CR LF becomes LF). ``keep_sgr`` keeps colour
    codes (``ESC [ … m``), for text our own :meth:`Output.style` already coloured.
    """
    string = text if isinstance(text, str) else str(text)
    if string.isascii() and string.isprintable():
        return string  # the common case, decided in C: nothing to show (no regex built)
    pattern = _pattern(multiline, keep_sgr)
    if pattern.search(string) is None:
        return string
    return pattern.sub(_visible, string)


_JSON_UNSAFE: re.Pattern[str] | None = None


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(value: Any) -> str:
    """Compact JSON that a terminal can show: what json leaves raw (DEL, C1, bidi
    controls, separators, lone surrogates) is written as ``\\uXXXX``, which decodes to
    the very same string (those characters only ever occur inside JSON strings)."""
    global _JSON_UNSAFE
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if text.isascii() and "\x7f" not in text:
        return text  # json escaped every other ASCII control: nothing to do (no regex built)
    if _JSON_UNSAFE is None:
        import re

        _JSON_UNSAFE = re.compile(f"[{_UNSAFE}]")
    if _JSON_UNSAFE.search(text) is None:
        return text
    return _JSON_UNSAFE.sub(_json_escape, text)


class Output:
    """The two streams, whether to print JSON, and whether to colour human text."""

    def __init__(
        self,
        json_mode: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        verbose: int = 0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.json = json_mode
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.verbose = verbose
        self.color = not json_mode and wants_color(self.stdout, environ)
        self.err_color = wants_color(self.stderr, environ)

    # -- styling
    def style(self, text: str, *styles: str, err: bool = False) -> str:
        if not (self.err_color if err else self.color) or not styles:
            return text
        codes = ";".join(_STYLES[s] for s in styles if s in _STYLES)
        return f"\033[{codes}m{text}\033[0m" if codes else text

    def status(self, value: str | None) -> str:
        text = clean(value) if value else "-"
        return self.style(text, STATUS_STYLES.get(text, ""))

    # -- printing: every human line passes through clean() (colour codes of ours stay)
    def line(self, text: str = "") -> None:
        self.stdout.write(clean(text, multiline=True, keep_sgr=self.color) + "\n")

    def write(self, text: str) -> None:
        """Raw text such as a log, control characters shown (tab and newline kept)."""
        self.stdout.write(clean(text, multiline=True, keep_sgr=self.color))
        self.stdout.flush()

    def note(self, text: str, *styles: str) -> None:
        """A diagnostic line on stderr (never part of the result)."""
        self.stdout.flush()
        self.stderr.write(self.style(clean(text, multiline=True), *styles, err=True) + "\n")
        self.stderr.flush()

    def ndjson(self, value: Any) -> None:
        self.stdout.write(dumps(value) + "\n")
        self.stdout.flush()

    def ok(self, result: Any) -> None:
        """The success envelope (``--json`` mode only)."""
        self.ndjson({"ok": True, "result": result})

    def error(
        self, code: int | str, message: str, data: Any = None, hint: str | None = None
    ) -> None:
        """An error: the envelope on stdout with ``--json``, else a message and hint on stderr."""
        if self.json:
            self.ndjson({"ok": False, "error": {"code": code, "message": message, "data": data}})
            return
        self.stdout.flush()
        prefix = self.style("error:", "red", "bold", err=True)
        self.stderr.write(f"{prefix} {clean(message, multiline=True)}\n")
        if hint:
            self.stderr.write(self.style(clean(hint, multiline=True), "dim", err=True) + "\n")
        self.stderr.flush()

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Left-aligned columns; the header is bold; cells may already hold colour codes.

        Each cell is one line: a newline or any other control character in it is shown
        escaped (a title cannot break the table or reach the terminal).
        """
        cells = [[clean(_cell(c), keep_sgr=self.color) for c in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], visible_len(cell))
        last = len(headers) - 1

        def pad(text: str, i: int) -> str:
            return text if i == last else text + " " * (widths[i] - visible_len(text))

        self.line("  ".join(pad(self.style(h.upper(), "bold"), i) for i, h in enumerate(headers)))
        for row in cells:
            self.line("  ".join(pad(cell, i) for i, cell in enumerate(row)))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else str(value)


def visible_len(text: str) -> int:
    """Length without ANSI colour codes."""
    if "\033[" not in text:
        return len(text)
    length, i = 0, 0
    while i < len(text):
        if text[i] == "\033":
            end = text.find("m", i)
            i = end + 1 if end >= 0 else len(text)
            continue
        length += 1
        i += 1
    return length


def money(value: Any) -> str:
    return f"${value:.2f}" if isinstance(value, int | float) else "-"


def duration(ms: Any) -> str:
    if not isinstance(ms, int | float):
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def counts(tasks: dict[str, int] | None) -> str:
    """Task counts by status, in the order a task moves through them."""
    if not tasks:
        return "no tasks"
    order = ["in_progress", "paused", "pending", "planning", "failed", "completed"]
    keys = [k for k in order if k in tasks] + sorted(k for k in tasks if k not in order)
    return ", ".join(f"{tasks[k]} {k.replace('_', ' ')}" for k in keys)


# --------------------------------------------------------------------------- hints

_HINTS: dict[int, str] = {
    codes.METHOD_NOT_FOUND: "it may be older than pokeralphctl: restart it "
    "(`pokeralphctl daemon stop`, then `pokeralphctl daemon start`)",
    codes.INVALID_PARAMS: "check the value you passed; "
    "`pokeralphctl COMMAND --help` shows the options",
    codes.INTERNAL_ERROR: "the daemon hit an internal error: see its log "
    "(`pokeralphctl daemon status` names it) and file a bug",
    codes.REPO_NOT_FOUND: "pass --repo NAME|PATH or run inside a registered repository; "
    "`pokeralphctl repos` lists them, `pokeralphctl init` registers one",
    codes.TASK_NOT_FOUND: "`pokeralphctl task list` shows the task ids",
    codes.VERSION_CONFLICT: "someone else changed it meanwhile: look again and retry",
    codes.ILLEGAL_TRANSITION: "`pokeralphctl task show ID` shows the current status",
    codes.CORRUPT_FILE: "fix or remove the named file under .pokeralph/, then retry",
    codes.NOT_A_GIT_REPO: "run `pokeralphctl init --git-init` to create the git repository",
    codes.REPO_LOCKED: "another pokeralphd holds this repository: stop it first",
    codes.BATTLE_ACTIVE: "`pokeralphctl battle show` shows it; "
    "`pokeralphctl battle cancel` ends it",
    codes.NO_BATTLE: "start one with `pokeralphctl battle start TASK`",
    codes.STORAGE_ERROR: "check free disk space and permissions, then retry",
    codes.AGENT_ERROR: "check the agent settings (`pokeralphctl config get agent`)",
    codes.NOT_FOUND: "check the name you passed",
    codes.INVALID_STATE: "`pokeralphctl battle show` or `pokeralphctl status` "
    "shows the current state",
    codes.SHUTTING_DOWN: "the daemon is stopping: start it again with `pokeralphctl daemon start`",
    codes.AGENT_SCOPE: "an agent asks a person with `pokeralphctl deliver --title T "
    "--schema confirm --blocking` (the answer is printed); everything else is for a person "
    "at their own terminal",
    codes.DELIVERY_NOT_FOUND: "`pokeralphctl inbox list` shows the open items",
    codes.INVALID_ANSWER: "`pokeralphctl inbox show ID` shows what the item asks for",
    codes.TOO_MANY_CONNECTIONS: "close other clients (`pokeralphctl daemon status` counts "
    "them), then retry",
}


def hint_for(code: int | str, data: Any = None) -> str:
    """What to do next after an error the daemon returned."""
    if isinstance(code, int) and code in _HINTS:
        return _HINTS[code]
    return "run the command again with --json to see the error's data"


def field_of(data: Any) -> str | None:
    if isinstance(data, dict) and isinstance(data.get("field"), str):
        return str(data["field"])
    return None
