"""The one place the daemon runs git: every git command it starts is built here, with
everything a repository could make git run switched off.

Why one place, and why here: an agent can write a repository's ``.git/config``,
``.git/hooks`` and ``.gitattributes`` (the sandbox makes ``.git`` read-only, but the
sandbox can be off, and a worktree's git folder is the repository's). Whatever git does
with them, it does as the daemon, outside every check. So no module builds a git command
line of its own: the git service, the worktrees and ``git init`` all call :func:`run`,
:func:`start` or :func:`run_async`, and a test forbids ``git`` anywhere else. It sits
beside ``proc.py`` at the bottom of the layers, so the battle and the repositories can
both use it; it is not ``pokeralphd/git.py`` because ``import git`` means GitPython.
GitPython is no longer used: it only ever ran these same commands, cost ~0.1 s to import
and starts ``git version`` as it does.

What is switched off, and how. Config goes to git as ``GIT_CONFIG_COUNT`` with
``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` pairs (:data:`PROTECTIONS`): like ``-c``,
they outrank every config file, a planted include or ``core.hooksPath`` too, and git
passes them on to the gits it starts itself (a rebase's, a worktree's checkout); unlike
``-c``, no ``=`` in a name can split a key from its value, and the command line stays
the subcommand's own. A ``GIT_CONFIG_PARAMETERS`` the daemon inherited (it is read after
them) is dropped.

- hooks: ``core.hooksPath=/dev/null`` (git looks for ``/dev/null/pre-commit`` and finds
  nothing). ``--no-verify`` never stopped ``prepare-commit-msg``, ``post-commit``,
  ``reference-transaction``, ``post-checkout``, ``post-merge``, ``pre-rebase``,
  ``post-rewrite`` or ``post-index-change``;
- the file-system monitor: ``core.fsmonitor=false`` (``git status`` ran it);
- external diff and textconv: ``--no-ext-diff --no-textconv`` on every ``diff``,
  ``show`` and ``log`` (:data:`SUBCOMMAND_FLAGS`), and ``GIT_EXTERNAL_DIFF`` dropped from
  the environment; a fast-forward ``merge`` prints no diffstat (``--no-stat``). Not
  ``diff.external=``: git would try to run the empty string;
- signing and verifying: ``commit.gpgSign``, ``tag.gpgSign``, ``log.showSignature``
  and ``merge.verifySignatures`` false, so no ``gpg.program`` runs (pokeralph's commits
  are unsigned even where the user signs theirs);
- pagers and editors: ``GIT_PAGER=cat`` (git's own word for "no pager"; git's output is
  never a terminal here anyway), ``GIT_EDITOR`` and ``GIT_SEQUENCE_EDITOR`` ``:`` (git's
  word for "no editor");
- the network and what it would run (credential helpers, askpass, ``core.sshCommand``,
  a ``remote.*.uploadpack``, an ``ext::`` URL, a partial clone's lazy fetch):
  ``GIT_ALLOW_PROTOCOL`` set empty allows no transport at all, whatever
  ``protocol.*.allow`` says; ``credential.helper`` and ``core.askPass`` emptied and
  ``GIT_TERMINAL_PROMPT=0`` besides. The daemon's git never needs the network;
- background work: ``gc.auto=0`` and ``maintenance.auto=false`` (an automatic gc is a
  detached child the daemon would not own, and runs ``pre-auto-gc``);
- submodules: ``submodule.recurse=false``, and ``status``/``diff`` look at a submodule's
  commit only (``--ignore-submodules=dirty``), never start git inside it (its own
  config is the agent's too).

Filters and merge and diff drivers have names the repository chooses
(``.gitattributes``: ``*.txt filter=x``; ``.git/config``: ``filter.x.clean = prog``), so
they cannot be switched off by a fixed key. :func:`repository_overrides` lists the
config (``git config --list --show-scope``, includes followed, with all the above on),
and for every name the repository's own files (scopes ``local`` and ``worktree``, and
what they include) define, empties ``filter.<x>.clean``, ``.smudge`` and ``.process``
and sets ``.required`` false (the content goes in and out as it is), sets
``merge.<x>.driver`` to ``false`` (a merge that needs it stops as a conflict, for a
person) and empties ``diff.<x>.command`` and ``.textconv``. They reach git as more
pairs after :data:`PROTECTIONS`. Drivers from the user's global or system config are
theirs and keep working (a git-lfs installed globally, say); one defined in the
repository's own config is not trusted, git-lfs installed ``--local`` included.

The listing is cached and used again while the repository's config files (found from its
``.git``: the common ``config``, the worktree's ``config.worktree``) are unchanged. A
working tree's files are stamped (inode, size, mtime and ctime) *before* the listing and
again after it; a listing is kept only if they did not change meanwhile. While the stamp
is the same, a lookup is two ``stat`` calls. When it is not, the files are read: if
their bytes are those of a listing kept (git rewrote the file as it was: ``git branch
-D`` does, for every branch it deletes; or another worktree of the same repository was
listed), that listing is used. What the repository's files define is all a listing is
made of here: it is listed anew for every command when the local config includes other
files (they could change unseen) or names files we did not expect. A listing is one
``git config`` process (2-5 ms here). Before contents were compared, a hundred battles
of ten repositories ending together listed the config three times per battle: each
deleted branch made every worktree of its repository list it again.

Not every answer needs a git: :mod:`pokeralphd.gitfiles` reads what the repository's
files say plainly (HEAD, a branch, where the config files are), without starting one.

Left as they are: what the daemon's own environment says (``GIT_CONFIG_GLOBAL``, the
user's identity and global config: the user's, not the repository's); git's aliases (we only run builtins, which aliases cannot shadow); ``trace2`` settings (git
reads them from the system and global config only). A config file changed between the
listing and the command it guards is read by that command: with the sandbox on, an
agent cannot write ``.git`` at all.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import subprocess
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from pokeralphd import childproc
from pokeralphd.errors import InvalidState
from pokeralphd.gitfiles import config_files

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

#: Config every git command gets, outranking every config file (see the module's
#: docstring): no hooks, no fsmonitor, no signing, no background gc, no submodule
#: recursion, no credential prompts.
PROTECTIONS: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("credential.helper", ""),
    ("core.askPass", ""),
)

#: Flags each subcommand gets right after its name: the ones that produce diffs use
#: git's own diff only, and nothing looks inside a submodule's working tree.
SUBCOMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"),
    "show": ("--no-ext-diff", "--no-textconv"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "status": ("--ignore-submodules=dirty",),
    "merge": ("--no-stat",),
}

#: Set in git's environment (see the module's docstring).
ENVIRONMENT: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "LC_ALL": "C",
}

#: Dropped from git's environment: another diff program, what would point git at a
#: repository other than the one it runs in, and config a git that started the daemon
#: passed on (read after ``GIT_CONFIG_COUNT``'s pairs, it would outrank ours).
UNSET: tuple[str, ...] = (
    "GIT_EXTERNAL_DIFF",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_CONFIG_PARAMETERS",
)

#: What a driver the repository defines becomes, by the kind of driver.
NEUTRAL: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "merge": (("driver", "false"),),
    "diff": (("command", ""), ("textconv", "")),
}
UNTRUSTED_SCOPES = frozenset({"local", "worktree"})
CACHED_REPOSITORIES = 64  # working trees whose overrides are remembered


class GitFailed(Exception):
    """Raised when a git command exits non-zero; carries its output."""

    def __init__(self, args: list[str], code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err
        super().__init__(f"git {' '.join(args)} exited {code}: {err.strip()[:500]}")


@dataclass(frozen=True)
class Result:
    """A finished git command: its exit code and output (decoded, invalid bytes replaced)."""

    code: int
    out: str
    err: str


def git_executable() -> str:
    """The git we run: ``$GIT_PYTHON_GIT_EXECUTABLE`` (the setting GitPython read, kept
    for those who set it), else ``git`` on PATH."""
    return os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"


def cannot_run_git(exc: Exception) -> InvalidState:
    """The error for a git that is missing or cannot run, with what to do."""
    return InvalidState(
        f"cannot run git: {exc}",
        hint="install git (or set GIT_PYTHON_GIT_EXECUTABLE to it), then retry",
    )


@contextlib.contextmanager
def starting_git() -> Iterator[None]:
    """Around starting a git process: a git that is missing is :func:`cannot_run_git`'s
    error (a missing folder to run it in stays a FileNotFoundError)."""
    try:
        yield
    except FileNotFoundError as exc:
        if exc.filename not in (git_executable(), None):
            raise
        raise cannot_run_git(exc) from exc


# ---------------------------------------------------------------- the command line


def argv(args: tuple[str, ...] | list[str]) -> list[str]:
    """The full command line for ``git ARGS``: the subcommand, its
    :data:`SUBCOMMAND_FLAGS`, the rest. ``args`` starts with the subcommand (config goes
    in the environment: :func:`environment`)."""
    if not args or args[0].startswith("-"):
        raise ValueError(f"git arguments must start with the subcommand, not {args[:1]}")
    sub, *rest = args
    return [git_executable(), sub, *SUBCOMMAND_FLAGS.get(sub, ()), *rest]


def environment(
    overrides: tuple[tuple[str, str], ...] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """git's environment: the daemon's, with :data:`ENVIRONMENT` set, :data:`UNSET`
    dropped, ``extra`` (an identity, say), and :data:`PROTECTIONS` and the repository's
    ``overrides`` as ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` pairs after any the
    daemon's own environment has (git reads them in order: the last of a key wins)."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(ENVIRONMENT)
    if extra:
        env.update(extra)
    try:
        count = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0
    for key, value in PROTECTIONS + overrides:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    return env


# ---------------------------------------------------------------- the repository's drivers


@dataclass(frozen=True)
class Listing:
    """What :func:`parse_listing` found in the repository's own config (scopes local
    and worktree): the drivers it defines as ``kind.name``, the files it came from, and
    whether it includes others (then it is never reused: they could change unseen)."""

    names: tuple[str, ...]
    origins: frozenset[str]
    includes: bool


def parse_listing(listing: str) -> Listing:
    """Read ``git config --list -z --show-scope --show-origin``: ``scope NUL origin NUL
    key LF value NUL`` per entry (git writes the section and variable in lower case, a
    subsection as it is)."""
    fields = listing.split("\0")
    names: set[str] = set()
    origins: set[str] = set()
    includes = False
    for i in range(0, len(fields) - 2, 3):
        scope, origin, entry = fields[i], fields[i + 1], fields[i + 2]
        if scope not in UNTRUSTED_SCOPES:
            continue
        origins.add(origin.removeprefix("file:"))
        section, _, rest = entry.split("\n", 1)[0].partition(".")
        name, dot, _variable = rest.rpartition(".")
        if section in ("include", "includeif"):
            includes = True
        elif section in NEUTRAL and dot and name:
            names.add(f"{section}.{name}")
    return Listing(tuple(sorted(names)), frozenset(origins), includes)


def overrides_for(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The config pairs that make each driver ``kind.name`` do nothing (:data:`NEUTRAL`)."""
    pairs: list[tuple[str, str]] = []
    for full in names:
        kind, _, name = full.partition(".")
        pairs += [(f"{kind}.{name}.{variable}", value) for variable, value in NEUTRAL[kind]]
    return tuple(pairs)


def _stamp(files: tuple[Path, ...]) -> tuple[tuple[int, int, int, int] | None, ...]:
    """What each file looks like: inode, size, mtime and ctime (None: missing). ctime
    cannot be set back by hand, as mtime can."""
    stamps: list[tuple[int, int, int, int] | None] = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(stamps)


#: Config files larger than this together are listed for every command, not kept.
MAX_KEPT_CONFIG = 1 << 20


def _contents(files: tuple[Path, ...]) -> bytes | None:
    """A digest of the files' bytes (a missing file says so); None when they are too big
    to keep or cannot be read."""
    digest = hashlib.sha256()
    total = 0
    for path in files:
        try:
            with open(path, "rb") as file:
                data = file.read(MAX_KEPT_CONFIG + 1)
        except FileNotFoundError:
            digest.update(b"-\0")
            continue
        except OSError:
            return None
        total += len(data)
        if total > MAX_KEPT_CONFIG:
            return None
        digest.update(b"%d\0" % len(data))
        digest.update(data)
    return digest.digest()


@dataclass(frozen=True)
class _Entry:
    files: tuple[Path, ...]
    stamp: tuple[tuple[int, int, int, int] | None, ...]
    contents: bytes  # the digest of the files' bytes this stamp was taken with


class _OverrideCache:
    """Listings kept by the bytes of the config files they were made from, and each
    working tree's files' stamp with the bytes it stands for (both bounded: the least
    recently used is forgotten first). Thread-safe: git steps run in threads."""

    def __init__(self, capacity: int = CACHED_REPOSITORIES) -> None:
        self.capacity = capacity
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._listed: collections.OrderedDict[bytes, tuple[tuple[str, str], ...]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()
        self.listings = 0  # how many times a config was listed (for the tests)

    def _kept(self, contents: bytes) -> tuple[tuple[str, str], ...] | None:
        overrides = self._listed.get(contents)
        if overrides is not None:
            self._listed.move_to_end(contents)
        return overrides

    def _remember(self, key: str, entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        for kept in (self._entries, self._listed):
            while len(kept) > self.capacity:
                kept.popitem(last=False)

    def get(self, cwd: Path) -> tuple[tuple[str, str], ...]:
        key = str(cwd)
        files = config_files(cwd)
        stamp = _stamp(files) if files is not None else None
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.files == files and entry.stamp == stamp:
                overrides = self._kept(entry.contents)
                if overrides is not None:
                    self._entries.move_to_end(key)
                    return overrides
        contents = None
        if files is not None and stamp is not None:
            contents = _contents(files)
            if contents is not None and _stamp(files) == stamp:  # what the stamp stands for
                with self._lock:
                    overrides = self._kept(contents)
                    if overrides is not None:
                        self._remember(key, _Entry(files, stamp, contents))
                        return overrides
        listing = parse_listing(_list_config(cwd))
        overrides = overrides_for(listing.names)
        known = {os.path.normpath(p) for p in files or ()}
        found = {os.path.normpath(cwd / origin) for origin in listing.origins}
        unchanged = files is not None and _stamp(files) == stamp  # while it was listed
        with self._lock:
            self.listings += 1
            if (
                files is not None
                and stamp is not None
                and contents is not None
                and unchanged
                and not listing.includes
                and found <= known
            ):
                self._listed[contents] = overrides
                self._remember(key, _Entry(files, stamp, contents))
            else:
                self._entries.pop(key, None)
        return overrides


def _list_config(cwd: Path) -> str:
    """``git config --list`` in ``cwd`` with every scope's origin, protections on."""
    args = ["config", "--list", "-z", "--show-scope", "--show-origin"]
    with starting_git():
        done = subprocess.run(
            argv(args), cwd=cwd, env=environment(), capture_output=True, stdin=subprocess.DEVNULL
        )
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace")
        raise GitFailed(args, done.returncode, done.stdout.decode("utf-8", "replace"), err)
    return done.stdout.decode("utf-8", "surrogateescape")


OVERRIDES = _OverrideCache()


def repository_overrides(cwd: Path) -> tuple[tuple[str, str], ...]:
    """The config pairs neutralising the drivers the repository at ``cwd`` defines
    (cached; see the module's docstring). GitFailed when its config cannot be read (git
    would refuse to run there anyway)."""
    return OVERRIDES.get(cwd)


# ---------------------------------------------------------------- running


def _prepare(
    cwd: Path, args: tuple[str, ...], extra: Mapping[str, str] | None, repository: bool
) -> tuple[list[str], dict[str, str]]:
    overrides = repository_overrides(cwd) if repository else ()
    return argv(args), environment(overrides, extra)


def _result(args: tuple[str, ...], code: int, out: bytes, err: bytes, check: bool) -> Result:
    done = Result(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
    if check and code != 0:
        raise GitFailed(list(args), code, done.out, done.err)
    return done


def run(
    cwd: Path,
    *args: str,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    repository: bool = True,
    timeout: float | None = None,
) -> Result:
    """Run ``git ARGS`` in ``cwd`` to the end, protected (see the module's docstring);
    ``env`` adds to its environment. GitFailed on a non-zero exit when ``check``.
    ``repository=False`` where there is no repository to read yet (``git init``)."""
    cmd, environ = _prepare(cwd, args, env, repository)
    with starting_git():
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=environ,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    return _result(args, done.returncode, done.stdout, done.stderr, check)


def start(cwd: Path, *args: str, stderr: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """Start ``git ARGS`` in ``cwd``, protected, its stdout a pipe (for output read only
    up to a bound); the caller waits for it."""
    cmd, environ = _prepare(cwd, args, None, True)
    with starting_git():
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


async def run_async(
    cwd: Path,
    *args: str,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    repository: bool = True,
    timeout: float = 120.0,
) -> Result:
    """:func:`run` for async callers: the overrides are looked up in a worker thread,
    the command runs driven from its descriptors (:func:`childproc.run`, Linux) or as an
    anyio child, at most ``timeout`` seconds (TimeoutError)."""
    cmd, environ = await anyio.to_thread.run_sync(_prepare, cwd, args, env, repository)
    with starting_git(), anyio.fail_after(timeout):
        if childproc.usable():
            # in the daemon's own session, as anyio starts it: a session of its own would
            # be an autogroup of its own, weighed by the scheduler as much as the daemon
            done = await childproc.run(cmd, cwd=str(cwd), env=environ, new_session=False)
        else:
            done = await anyio.run_process(cmd, cwd=cwd, env=environ, check=False)
    return _result(args, done.returncode, done.stdout, done.stderr, check)
