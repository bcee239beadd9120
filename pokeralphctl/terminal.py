"""What a command runs in: its environment, working directory and standard streams.

The command line reads these from the process (:meth:`Terminal.of_process`), and the
client takes them from here, not from ``os.environ``, ``os.getcwd()`` or ``sys.stdin``:
the socket, the XDG folders, ``$HOME``, ``$NO_COLOR``, the autostart opt-out, an agent's
``POKERALPH_*`` variables, relative paths, prompts, help and usage errors. So a command
can also run inside another program with an environment and streams of its own (the
tests run most commands this way, beside a daemon in the same process), and ``--socket``
reaches a daemon that ``daemon start`` spawns without changing the process's
environment. What still comes from the process: a spawned daemon's working directory,
``$TMPDIR`` (for the last-resort socket folder) and ``$COLUMNS`` (help's width); and
``daemon start --foreground`` replaces the calling process with the daemon.

Standard library only, no dataclasses: this is imported on every client start.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO


class WorkingDirectoryGone(FileNotFoundError):
    """A relative path was given where the working directory no longer exists."""

    def __init__(self, path: str) -> None:
        super().__init__(f"cannot resolve {path!r}: the working directory no longer exists")
        self.path = path


class Terminal:
    """The environment, working directory and streams of one command."""

    __slots__ = ("cwd", "env", "stderr", "stdin", "stdout")

    def __init__(
        self,
        env: Mapping[str, str],
        cwd: str | None,
        stdin: TextIO,
        stdout: TextIO,
        stderr: TextIO,
    ) -> None:
        self.env = env
        #: None when the working directory was deleted
        self.cwd = cwd
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    def of_process(cls) -> Terminal:
        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the working directory was deleted
            cwd = None
        return cls(os.environ, cwd, sys.stdin, sys.stdout, sys.stderr)

    def with_env(self, **changes: str) -> Terminal:
        """The same terminal with some environment variables set (a copy: the process's
        own environment is not changed)."""
        return Terminal({**self.env, **changes}, self.cwd, self.stdin, self.stdout, self.stderr)

    def abspath(self, path: str) -> str:
        """``path`` made absolute against this working directory, ``~`` expanded with
        this environment's ``$HOME``."""
        if path == "~" or path.startswith("~/"):
            home = self.env.get("HOME") or os.path.expanduser("~")
            path = home + path[1:]
        elif path.startswith("~"):
            path = os.path.expanduser(path)  # ~user
        if not os.path.isabs(path):
            if self.cwd is None:
                raise WorkingDirectoryGone(path)
            path = os.path.join(self.cwd, path)
        return os.path.normpath(path)

    def xdg_dir(self, var: str, fallback: str) -> str:
        """An XDG base folder: ``$var`` when it is an absolute path (the spec says to
        ignore a relative one), else ``fallback`` under ``~`` (``".config"``)."""
        value = self.env.get(var, "").strip()
        return value if os.path.isabs(value) else self.abspath("~/" + fallback)

    def interactive(self) -> bool:
        """Whether a person can answer prompts (stdin is a terminal)."""
        isatty = getattr(self.stdin, "isatty", None)
        return bool(isatty and isatty())

    def ask(self, prompt: str) -> str:
        """One line typed in answer to ``prompt``, without its newline; EOFError at the end
        of input (as ``input()``, whose line editing is used on the process's own terminal)."""
        if self.stdin is sys.stdin and self.stdout is sys.stdout:
            return input(prompt)
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return line[:-1] if line.endswith("\n") else line
