"""What the ten tools do, inside the working directory (:mod:`.sandbox`).

Each tool returns a :class:`ToolOutcome` or raises :class:`ToolError` with a message
for the model; the loop turns either into a ToolResult. Output is capped by the loop
(:mod:`.output`); the tools bound what they read and hold themselves: files read at most
:data:`MAX_READ` bytes, searches stop after :data:`MAX_MATCHES` hits or
:data:`SEARCH_SECONDS`, a command's output is kept up to :data:`KEEP_OUTPUT` bytes at
each end.

``fetch_webpage`` reaches public addresses only, redirects and DNS answers checked hop
by hop (:mod:`.fetch`).

``run_in_terminal`` runs ``sh -c`` in its own process group, with no input, and ends the
whole group (SIGTERM, then SIGKILL) when its timeout passes or the agent is stopped.
"""

from __future__ import annotations

import fnmatch
import html
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from pokeralph_agent.errors import ToolError
from pokeralph_agent.fetch import MAX_FETCH, Fetcher
from pokeralph_agent.output import cap

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralph_agent.sandbox import Sandbox

MAX_READ = 1 << 20  # bytes of a file read_file, replace_string_in_file and grep look at
MAX_WRITE = 1 << 20  # bytes create_file writes
MAX_ENTRIES = 1000  # list_dir and file_search results
MAX_MATCHES = 200  # grep_search hits
SEARCH_SECONDS = 10.0
KEEP_OUTPUT = 64 * 1024  # of a command's output, bytes kept at its start and its end
DEFAULT_COMMAND_TIMEOUT = 120
MAX_COMMAND_TIMEOUT = 600
KILL_GRACE = 2.0
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".pokeralph"}


@dataclass
class ToolOutcome:
    output: str
    files_affected: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    success: bool = True
    error: str | None = None
    keep: Literal["head", "tail", "both"] = "head"


@dataclass
class LastCommand:
    command: str
    exit_code: int | None
    output: str
    timed_out: bool


@dataclass
class Toolbox:
    sandbox: Sandbox
    fetch_enabled: bool = False
    fetcher: Fetcher = field(default_factory=Fetcher)
    last: LastCommand | None = None

    async def run(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        method = getattr(self, f"t_{name}", None)
        if method is None:
            raise ToolError(f"unknown tool {name!r}")
        outcome: ToolOutcome = await method(**args)
        return outcome

    # -- files
    def _text(self, real: Path) -> str:
        if not real.exists():
            raise ToolError(f"{self.sandbox.relative(real)} does not exist")
        if real.is_dir():
            raise ToolError(f"{self.sandbox.relative(real)} is a directory (use list_dir)")
        with open(real, "rb") as handle:
            data = handle.read(MAX_READ + 1)
        if len(data) > MAX_READ:
            raise ToolError(
                f"{self.sandbox.relative(real)} is larger than {MAX_READ // 1024} KB; "
                "read it with a line range, or search it with grep_search"
            )
        if b"\0" in data[:8192]:
            raise ToolError(f"{self.sandbox.relative(real)} is a binary file")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(
                f"{self.sandbox.relative(real)} is not UTF-8 text ({exc.reason})"
            ) from None

    def _write(self, real: Path, text: str, *, exclusive: bool) -> int:
        data = text.encode("utf-8", errors="surrogatepass")
        real.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
        try:
            fd = os.open(real, flags, 0o644)
        except FileExistsError:
            raise ToolError(
                f"{self.sandbox.relative(real)} exists; pass overwrite: true to replace it, "
                "or change it with replace_string_in_file"
            ) from None
        except OSError as exc:
            raise ToolError(f"cannot write {self.sandbox.relative(real)}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return len(data)

    async def t_create_file(self, path: str, content: str, overwrite: bool = False) -> ToolOutcome:
        real = self.sandbox.resolve(path)
        rel = self.sandbox.relative(real)
        if real == self.sandbox.root or real.is_dir():
            raise ToolError(f"{rel} is a directory")
        if len(content.encode("utf-8", errors="surrogatepass")) > MAX_WRITE:
            raise ToolError(f"content is larger than {MAX_WRITE // 1024} KB")
        existed = real.exists()
        if existed and not overwrite:
            raise ToolError(
                f"{rel} exists; pass overwrite: true to replace it, or change it with "
                "replace_string_in_file"
            )
        size = self._write(real, content, exclusive=not overwrite)
        verb = "Replaced" if existed else "Created"
        return ToolOutcome(f"{verb} file: {rel} ({size} bytes)", [rel], {"bytes_written": size})

    async def t_read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ToolOutcome:
        real = self.sandbox.resolve(path)
        text = self._text(real)
        lines = text.splitlines(keepends=True)
        first = start_line or 1
        last = min(end_line or len(lines), len(lines))
        if end_line is not None and end_line < first:
            raise ToolError(f"end_line {end_line} is before start_line {first}")
        if first > max(len(lines), 1):
            raise ToolError(f"{self.sandbox.relative(real)} has only {len(lines)} lines")
        chosen = "".join(lines[first - 1 : last])
        meta = {"total_lines": len(lines), "start_line": first, "end_line": last}
        shown = cap(chosen)
        if shown.truncated:
            seen = shown.text.split("\n[output truncated")[0].count("\n")
            more = first + seen
            return ToolOutcome(
                shown.text + f"\n[read on with start_line={more}]", metadata=meta, keep="head"
            )
        return ToolOutcome(chosen, metadata=meta)

    async def t_replace_string_in_file(
        self, path: str, old_string: str, new_string: str
    ) -> ToolOutcome:
        real = self.sandbox.resolve(path)
        rel = self.sandbox.relative(real)
        if not old_string:
            raise ToolError("old_string is empty: say which text to replace")
        text = self._text(real)
        count = text.count(old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {rel}; read the file and copy the text exactly "
                "(whitespace and indentation included)"
            )
        if count > 1:
            raise ToolError(
                f"old_string occurs {count} times in {rel}; it must occur exactly once: "
                "include more of the surrounding lines"
            )
        changed = text.replace(old_string, new_string, 1)
        if len(changed.encode("utf-8", errors="surrogatepass")) > MAX_WRITE:
            raise ToolError(f"the file would be larger than {MAX_WRITE // 1024} KB")
        size = self._write(real, changed, exclusive=False)
        line = text[: text.index(old_string)].count("\n") + 1
        return ToolOutcome(
            f"Replaced 1 occurrence in {rel} at line {line}", [rel], {"bytes_written": size}
        )

    async def t_create_directory(self, path: str) -> ToolOutcome:
        real = self.sandbox.resolve(path)
        rel = self.sandbox.relative(real)
        if real.exists() and not real.is_dir():
            raise ToolError(f"{rel} exists and is not a directory")
        existed = real.exists()
        try:
            real.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolError(f"cannot create {rel}: {exc.strerror}") from None
        return ToolOutcome(
            f"{'Directory exists' if existed else 'Created directory'}: {rel}",
            [] if existed else [rel],
        )

    async def t_list_dir(self, path: str = ".") -> ToolOutcome:
        real = self.sandbox.resolve(path)
        rel = self.sandbox.relative(real)
        if not real.is_dir():
            raise ToolError(f"{rel} is not a directory")
        names = []
        with os.scandir(real) as entries:
            for entry in entries:
                names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
                if len(names) > MAX_ENTRIES:
                    break
        names.sort()
        more = len(names) > MAX_ENTRIES
        body = "\n".join(names[:MAX_ENTRIES]) or "(empty)"
        if more:
            body += f"\n[more than {MAX_ENTRIES} entries; listing cut]"
        return ToolOutcome(body, metadata={"entries": min(len(names), MAX_ENTRIES)})

    # -- search
    def _walk(self, under: Path) -> Any:
        for dirpath, dirnames, filenames in os.walk(under, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                yield os.path.join(dirpath, name)

    async def t_file_search(self, pattern: str) -> ToolOutcome:
        regex = glob_regex(self._pattern(pattern))
        return await anyio.to_thread.run_sync(self._find, regex, pattern)

    def _find(self, regex: re.Pattern[str], pattern: str) -> ToolOutcome:
        root = self.sandbox.root
        found: list[str] = []
        deadline = time.monotonic() + SEARCH_SECONDS
        for full in self._walk(root):
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if regex.fullmatch(rel):
                found.append(rel)
                if len(found) > MAX_ENTRIES:
                    break
            if time.monotonic() > deadline:
                found.append(f"[search stopped after {SEARCH_SECONDS:g} s]")
                break
        body = "\n".join(found[:MAX_ENTRIES]) or f"no file matches {pattern}"
        if len(found) > MAX_ENTRIES:
            body += f"\n[more than {MAX_ENTRIES} matches; narrow the pattern]"
        return ToolOutcome(body, metadata={"matches": min(len(found), MAX_ENTRIES)})

    def _pattern(self, pattern: str) -> str:
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolError("a glob pattern is relative to the working directory, without ..")
        return pattern.removeprefix("./")

    async def t_grep_search(
        self,
        query: str,
        is_regex: bool = False,
        include_pattern: str | None = None,
        path: str | None = None,
    ) -> ToolOutcome:
        if not query:
            raise ToolError("query is empty")
        try:
            regex = re.compile(query if is_regex else re.escape(query))
        except re.error as exc:
            raise ToolError(f"query is not a valid regular expression: {exc}") from None
        include = glob_regex(self._pattern(include_pattern)) if include_pattern else None
        under = self.sandbox.resolve(path) if path else self.sandbox.root
        return await anyio.to_thread.run_sync(self._grep, regex, include, under)

    def _grep(
        self, regex: re.Pattern[str], include: re.Pattern[str] | None, under: Path
    ) -> ToolOutcome:
        root = self.sandbox.root
        hits: list[str] = []
        deadline = time.monotonic() + SEARCH_SECONDS
        stopped = ""
        files = 0
        walk = self._walk(under) if under.is_dir() else iter([str(under)])
        for full in walk:
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if include is not None and not include.fullmatch(rel):
                continue
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            try:
                with open(full, "rb") as handle:
                    data = handle.read(MAX_READ)
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            files += 1
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line[:2000]):
                    hits.append(f"{rel}:{number}: {line[:300]}")
                    if len(hits) >= MAX_MATCHES:
                        stopped = f"[stopped at {MAX_MATCHES} matches; narrow the search]"
                        break
            if stopped:
                break
            if time.monotonic() > deadline:
                stopped = f"[search stopped after {SEARCH_SECONDS:g} s]"
                break
        body = "\n".join(hits) if hits else "no match"
        if stopped:
            body += "\n" + stopped
        return ToolOutcome(body, metadata={"matches": len(hits), "files_searched": files})

    # -- the terminal
    async def t_run_in_terminal(
        self, command: str, timeout_seconds: float | None = None
    ) -> ToolOutcome:
        """The model's calls give whole seconds (its schema says integer, at least 1);
        a caller of the toolbox may give a fraction."""
        if not command.strip():
            raise ToolError("command is empty")
        timeout = min(timeout_seconds or DEFAULT_COMMAND_TIMEOUT, MAX_COMMAND_TIMEOUT)
        began = time.monotonic()
        process = await anyio.open_process(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=str(self.sandbox.root),
            start_new_session=True,
        )
        head = bytearray()
        tail = bytearray()
        total = [0]
        timed_out = False

        async def read() -> None:
            assert process.stdout is not None
            async for chunk in process.stdout:
                total[0] += len(chunk)
                room = KEEP_OUTPUT - len(head)
                if room > 0:
                    head.extend(chunk[:room])
                    chunk = chunk[room:]
                if chunk:
                    tail.extend(chunk)
                    del tail[:-KEEP_OUTPUT]

        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None or timed_out:
                # here only: it loads psutil, which a command that ends by itself
                # never needs
                from pokeralph_core.proctree import end_tree

                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(end_tree, process.pid, KILL_GRACE)
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await process.aclose()
        code = process.returncode
        skipped = total[0] - len(head) - len(tail)
        text = head.decode("utf-8", "replace")
        if skipped > 0:
            text += f"\n[… {skipped:,} bytes of output not kept …]\n"
        text += tail.decode("utf-8", "replace")
        if timed_out:
            status = f"stopped after the {timeout:g} s timeout"
            ended = f"was {status}"
        elif code is not None and code < 0:
            status = f"killed by signal {-code}"
            ended = f"was {status}"
        else:
            status = f"exit status {code}"
            ended = f"ended with {status}"
        self.last = LastCommand(command, code, text, timed_out)
        ms = int((time.monotonic() - began) * 1000)
        output = (
            f"$ {command}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}[{status}]"
        )
        ok = code == 0 and not timed_out
        return ToolOutcome(
            output,
            metadata={
                "exit_code": code,
                "timed_out": timed_out,
                "output_bytes": total[0],
                "duration_ms": ms,
            },
            success=ok,
            error=None if ok else f"the command {ended}",
            keep="both",
        )

    async def t_terminal_last_command(self) -> ToolOutcome:
        if self.last is None:
            return ToolOutcome("no command has been run yet in this session")
        last = self.last
        status = "timed out" if last.timed_out else f"exit status {last.exit_code}"
        return ToolOutcome(f"$ {last.command}\n[{status}]\n{last.output}", keep="both")

    # -- the network
    async def t_fetch_webpage(self, url: str) -> ToolOutcome:
        if not self.fetch_enabled:
            raise ToolError(
                "fetch_webpage is disabled (the user can enable it with agent.local.fetchWebpage)"
            )
        if not re.match(r"^https?://", url):
            raise ToolError("only http:// and https:// URLs can be fetched")
        import httpx

        try:
            fetched = await self.fetcher.get(url)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(f"fetching {url} failed: {exc}") from None
        data, status, kind = fetched.data, fetched.status, fetched.content_type
        text = data[:MAX_FETCH].decode("utf-8", "replace")
        if "html" in kind:
            text = html_text(text)
        return ToolOutcome(
            f"HTTP {status} {url}\n{text}",
            metadata={"status": status, "bytes": len(data)},
            success=status < 400,
            error=None if status < 400 else f"HTTP {status}",
        )


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over relative POSIX paths: ``*`` and ``?`` stay within a segment, ``**``
    crosses them (``**/`` also matches no folder at all)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out += re.escape("[")
                i += 1
            else:
                out += fnmatch.translate(pattern[i : end + 1])[4:-3]
                i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    if "/" not in pattern:
        out = "(?:.*/)?" + out  # a bare name pattern matches at any depth
    return re.compile(out)


_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.DOTALL | re.IGNORECASE)


def html_text(page: str) -> str:
    text = html.unescape(_TAGS.sub(" ", page))
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()
