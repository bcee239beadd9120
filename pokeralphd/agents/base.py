"""The agent interface: what a backend must say (argv, stdin, how to parse a line, or a
two-way :class:`Conversation` for a protocol such as ACP) and the events and outcome a run
produces; and how a user's own flags replace a backend's defaults (:func:`merge_flags`).
One small interface; each backend is one module."""

from __future__ import annotations

import abc
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pokeralphd.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralph_core.config.model import AgentConfig
    from pokeralphd.domain.models import Usage
    from pokeralphd.ports import Clock
    from pokeralphd.proc import AgentScope, ProcessOwner


@dataclass(frozen=True, slots=True)
class AgentStarted:
    session_id: str | None
    model: str | None
    pid: int


@dataclass(frozen=True, slots=True)
class AgentText:
    """The agent's own words: the only place a completion signal is looked for."""

    text: str


@dataclass(frozen=True, slots=True)
class AgentLines:
    """Several of the agent's own words at once, each an :class:`AgentText` in meaning:
    a plain-text agent's lines of one read, handled together (a flood of output costs a
    step a read, not a step a line through every layer)."""

    texts: list[str]


@dataclass(frozen=True, slots=True)
class AgentToolUse:
    name: str
    summary: str
    id: str | None = None  # the backend's id for the call (Claude Code: ``toolu_…``)
    input: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class AgentToolResult:
    """A tool's output: it echoes files and commands, so it is never searched for signals."""

    text: str
    is_error: bool
    tool_use_id: str | None = None
    # The files the call touched, when the agent names them (ACP's ``locations``);
    # None: the tool call log works them out from the call's input.
    files: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class AgentPermissionDenied:
    """The agent refused a tool call on its own, with nobody asked (Claude Code's
    ``system``/``permission_denied``, or an entry of the result's ``permission_denials``)."""

    tool_name: str
    tool_use_id: str | None
    message: str


@dataclass(frozen=True, slots=True)
class AgentRateLimit:
    status: str
    resets_at: float | None
    limit_type: str | None


@dataclass(frozen=True, slots=True)
class AgentResult:
    text: str
    is_error: bool
    subtype: str | None
    cost_usd: float | None
    usage: Usage | None
    num_turns: int | None
    duration_ms: int | None
    session_id: str | None
    # The HTTP status and error type of a failed API call, when the CLI reports them
    # (Claude Code: ``api_error_status``/``api_error_type`` on an ``is_error`` result).
    api_error_status: int | None = None
    api_error_type: str | None = None


@dataclass(frozen=True, slots=True)
class AgentStderr:
    text: str


@dataclass(frozen=True, slots=True)
class AgentNotice:
    """An unknown event type or an unparsable line: logged and skipped, never fatal."""

    text: str


@dataclass(frozen=True, slots=True)
class AgentPermissionRequest:
    """The agent asks whether it may run a tool (Claude Code's ``can_use_tool``)."""

    request_id: str
    tool_name: str
    input: dict[str, Any]
    description: str
    tool_use_id: str | None = None


ApprovalMethod = Literal["manual", "auto", "config_rule"]


@dataclass(frozen=True, slots=True)
class PermissionAnswer:
    """The answer to a permission request: allow (maybe with a changed input) or deny with
    a message the model sees; and how it was decided (seed 001's approval method: a person,
    automatically by the policy, or by the rule ``rule_id``)."""

    allow: bool
    message: str = ""
    updated_input: dict[str, Any] | None = None
    method: ApprovalMethod = "auto"
    rule_id: str | None = None


@dataclass(frozen=True, slots=True)
class AgentPermissionDecision:
    """Our answer to an :class:`AgentPermissionRequest`, once given (the runner reports it)."""

    request: AgentPermissionRequest
    answer: PermissionAnswer


PermissionHandler = Callable[[AgentPermissionRequest], Awaitable[PermissionAnswer]]

AgentEvent = (
    AgentStarted
    | AgentText
    | AgentLines
    | AgentToolUse
    | AgentToolResult
    | AgentRateLimit
    | AgentResult
    | AgentStderr
    | AgentNotice
    | AgentPermissionRequest
    | AgentPermissionDecision
    | AgentPermissionDenied
)


ApiFailureKind = Literal["rate_limit", "overloaded", "server", "connection", "exit_code"]


@dataclass(frozen=True, slots=True)
class ApiFailure:
    """A run that failed because the model API refused or failed the call, not because of
    the agent's work: it is retried (after a reset or a backoff), never counted.

    ``rate_limit`` is a 429 (``rate_limit_error``); ``overloaded`` a 529
    (``overloaded_error``); ``server`` any other 5xx (``api_error``). ``resets_at`` is
    the reset the CLI's message or headers named, when it named one. The battle adds
    ``connection`` (the API could not be reached) and ``exit_code`` (the agent's exit
    status 23 or 124, seed 003's transient codes): see ``pokeralphd.battle.transient``.
    """

    kind: ApiFailureKind
    status: int | None
    message: str
    resets_at: float | None = None


@dataclass
class AgentRequest:
    prompt: str
    cwd: Path
    mode: Literal["execute", "plan"]
    config: AgentConfig
    env: dict[str, str] = field(default_factory=dict)
    resume_session: str | None = None
    timeout: float | None = None
    idle_timeout: float | None = None
    kill_grace: float = 5.0
    owner: ProcessOwner | None = None  # the daemon's mark on the child (see proc.py)
    scope: AgentScope | None = None  # what the run works for: limits what it may ask us
    clock: Clock = SYSTEM_CLOCK  # the run timeout and the idle watchdog run on it
    # Asked before a tool runs, when the backend routes permissions; a wait for the
    # answer counts toward neither the idle watchdog nor the run timeout.
    permissions: PermissionHandler | None = None


# The agent's words an outcome keeps for judging (its completion signal, its last word),
# in characters: an agent printing for an hour must not hold every line in memory.
TEXT_TAIL = 64 << 10  # the latest words, all of them (and the last one, however long)
TEXT_MARKED = 256 << 10  # of older words, those with a "<" (every completion signal has one)


@dataclass
class AgentOutcome:
    exit_code: int | None
    reason: Literal["exited", "timeout", "idle", "cancelled"]
    #: The agent's own words, in order (see :meth:`add_text`: bounded).
    texts: list[str] = field(default_factory=list)
    result: AgentResult | None = None
    session_id: str | None = None
    error: str | None = None
    duration_ms: int = 0
    rate_limited_until: float | None = None  # a rejected rate_limit_event's reset
    api_failure: ApiFailure | None = None  # a transient API failure (see ApiFailure)
    #: The words came a line at a time (a plain-text agent: :meth:`add_texts`), not as
    #: messages or a message's pieces: what spans lines is read across them.
    by_lines: bool = False
    _chars: int = field(default=0, repr=False, compare=False)

    def add_texts(self, texts: list[str]) -> None:
        """A plain-text agent's lines (:meth:`add_text` for each, in one step)."""
        self.by_lines = True
        self.texts.extend(texts)
        self._chars += sum(map(len, texts))
        if self._chars > 2 * TEXT_TAIL + TEXT_MARKED:
            self._trim()

    def add_text(self, text: str) -> None:
        """Keep the agent's words: the latest TEXT_TAIL characters whole, and of older
        ones only those that may hold a completion signal (up to TEXT_MARKED, the newest
        first), in order. Judging reads the last block, any sigil and the last word, so it
        sees what it would in all of them; the log has everything."""
        self.texts.append(text)
        self._chars += len(text)
        if self._chars > 2 * TEXT_TAIL + TEXT_MARKED:
            self._trim()

    def _trim(self) -> None:
        texts = self.texts
        tail = len(texts) - 1  # the last word is kept, however long
        size = len(texts[tail])
        while tail > 0 and size + len(texts[tail - 1]) <= TEXT_TAIL:
            tail -= 1
            size += len(texts[tail])
        marked: list[str] = []
        for text in reversed(texts[:tail]):
            if "<" in text and size + len(text) <= TEXT_TAIL + TEXT_MARKED:
                marked.append(text)
                size += len(text)
        self.texts = [*reversed(marked), *texts[tail:]]
        self._chars = size


def json_events(
    line: bytes, parse: Callable[[dict[str, Any]], list[AgentEvent]]
) -> list[AgentEvent]:
    """One JSON-lines event through ``parse``; anything unparsable becomes a notice, never an error."""
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return [AgentNotice(f"not JSON: {line[:200].decode('utf-8', 'replace')}")]
    if not isinstance(event, dict):
        return [AgentNotice(f"unexpected line: {str(event)[:200]}")]
    try:
        return parse(event)
    except Exception as exc:  # a malformed event is a notice, never fatal
        return [AgentNotice(f"malformed {event.get('type')!r} event: {exc}")]


class AgentBackend(abc.ABC):
    """How to start one kind of agent and read what it prints."""

    name: str = "agent"
    default_command: str = ""

    def executable(self, request: AgentRequest) -> str:
        return self.program(request.config)

    def program(self, config: AgentConfig) -> str:
        """The executable the configuration names (``agent.command``), else the default."""
        return config.command or self.default_command

    @abc.abstractmethod
    def argv(self, request: AgentRequest) -> list[str]:
        """The full command line."""

    def default_env(self, request: AgentRequest) -> dict[str, str]:
        """Variables the backend sets for its agent; ``agent.env`` overrides them."""
        return {}

    def environment(self, request: AgentRequest) -> dict[str, str]:
        """The agent's variables on top of the daemon's: the backend's defaults, then
        ``agent.env``, then the run's own (the socket, the task)."""
        return {**self.default_env(request), **request.config.env, **request.env}

    def stdin_bytes(self, request: AgentRequest) -> bytes | None:
        """What to write on stdin first (None: stdin is /dev/null). It is closed then,
        unless the run routes permissions (:meth:`routes_permissions`): then it stays
        open for the answers and is closed once the agent printed its result."""
        return None if request.config.prompt_via == "argument" else request.prompt.encode()

    def can_route(self, config: AgentConfig) -> bool:
        """Whether runs of this backend, so configured, ask the daemon before a tool runs
        (its approval rules and ``permissions.unmatched`` apply only then)."""
        return False

    def unrouted(self, config: AgentConfig) -> str:
        """Who does not ask before a tool runs, for a warning (when :meth:`can_route` is
        false)."""
        return f"the {self.name} backend"

    def routes_permissions(self, request: AgentRequest) -> bool:
        """Whether this run asks the daemon before a tool runs."""
        return (
            request.permissions is not None
            and request.mode == "execute"
            and self.can_route(request.config)
        )

    def permission_response(self, request_id: str, answer: PermissionAnswer) -> bytes:
        """The line that answers ``request_id`` on the agent's stdin."""
        raise NotImplementedError(f"the {self.name} backend does not route permissions")

    @abc.abstractmethod
    def parse_line(self, line: bytes) -> list[AgentEvent]:
        """Events in one stdout line; never raises."""

    def parse_lines(self, lines: list[bytes]) -> list[AgentEvent]:
        """Events in the stdout lines of one read, blank lines skipped; never raises."""
        return [event for line in lines if line.strip() for event in self.parse_line(line)]

    def conversation(self, request: AgentRequest) -> Conversation | None:
        """A two-way exchange with the agent over its stdio (ACP), or None: the agent is
        fed :meth:`stdin_bytes` and read line by line through :meth:`parse_line`."""
        return None

    def auth_hint(self) -> str:
        """What to do when the agent says its credentials were refused."""
        return (
            f"is {self.name} logged in? run `{self.default_command or self.name}` once by hand "
            "to log in"
        )

    def missing_hint(self) -> str:
        return "install it, or set agent.command to its path (`pokeralphctl config set agent.command PATH`)"


class AgentChannel(Protocol):
    """What the runner gives a :class:`Conversation`: the agent's stdin, the run's events,
    and the permission handler (its waits count toward neither the idle watchdog nor the
    run timeout)."""

    async def send(self, data: bytes) -> None:
        """Write ``data`` on the agent's stdin (nothing once it is closed)."""

    def emit(self, event: AgentEvent) -> None:
        """Report an event of the run (as :meth:`AgentBackend.parse_line` results are)."""

    async def ask(self, request: AgentPermissionRequest) -> PermissionAnswer:
        """Decide a permission request through the run's handler; the decision is
        reported as an :class:`AgentPermissionDecision`."""


class Conversation(abc.ABC):
    """A backend that talks with its agent both ways (the Agent Client Protocol): the
    runner hands it every stdout line, runs :meth:`converse` beside the readers, closes the
    agent's stdin and ends it once that returns, and calls :meth:`stop` (bounded) before it
    ends an agent that must stop (cancel, pause, timeout, idle)."""

    @abc.abstractmethod
    def receive(self, line: bytes) -> None:
        """One stdout line (bounded: a longer line comes in pieces of ``childlines.MAX_LINE``
        bytes); never raises, never blocks."""

    @abc.abstractmethod
    def closed(self) -> None:
        """The agent's stdout ended: nothing more will be received."""

    @abc.abstractmethod
    async def converse(self, channel: AgentChannel) -> None:
        """The whole exchange; a failure is reported as an error :class:`AgentResult`,
        never raised."""

    @abc.abstractmethod
    async def stop(self, channel: AgentChannel) -> None:
        """Ask the agent to stop what it is doing (its output is no longer read)."""


@dataclass(frozen=True, slots=True)
class Flag:
    """A default option of a backend's command line that a user's ``agent.extraArgs`` may
    replace: its names (``--sandbox``, ``-s``) and its values (none for a switch)."""

    names: tuple[str, ...]
    values: tuple[str, ...] = ()


def user_options(extra: Sequence[str]) -> set[str]:
    """The option names a user's arguments give: ``--opt``, ``--opt=value``, ``-o``,
    ``-ovalue`` (up to a ``--``, after which nothing is an option)."""
    names: set[str] = set()
    for arg in extra:
        if arg == "--":
            break
        if arg.startswith("--") and len(arg) > 2:
            names.add(arg.split("=", 1)[0])
        elif arg.startswith("-") and len(arg) >= 2 and arg[1] != "-":
            names.add(arg[:2])
    return names


def merge_flags(defaults: Sequence[Flag], extra: Sequence[str]) -> list[str]:
    """Our default options, each one the user does not give themselves, then the user's
    own arguments: a user's ``--sandbox workspace-write`` (or ``--sandbox=…``, ``-s …``)
    replaces our ``--sandbox``, where passing both would fail (Codex: "cannot be used
    multiple times", exit 2) or leave which one wins to the CLI."""
    given = user_options(extra)
    argv: list[str] = []
    for flag in defaults:
        if not given.intersection(flag.names):
            argv += [flag.names[0], *flag.values]
    return argv + list(extra)
