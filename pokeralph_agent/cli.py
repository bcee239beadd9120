"""``pokeralph-agent``: the local-model coding agent (seed 001), on its own or in a battle.

On its own::

    pokeralph-agent -p "create a hello world script"      # a new session here
    pokeralph-agent --continue -p "now add a test"        # the last session of this folder
    pokeralph-agent --end                                 # close the last session
    pokeralph-agent --json -p "…"                         # one JSON result on stdout

It reads the same configuration as the daemon (the user's config, then the repository's
``.pokeralph/config.json`` found from here upwards, trust included): ``agent.model``,
``agent.local.*`` and the approval rules; flags override. A call no rule decides is asked
at the terminal; without one it is denied, or allowed with ``--yes``. It writes none of the
daemon's files: an "allow always" and the read-only default rules are written into the
user's config by the daemon, asked over its socket (:mod:`.daemon_link`); without a daemon
they hold for this run only.

In a battle the daemon runs ``python -m pokeralph_agent --stream-json …``: Claude
Code's stream-json in and out (:mod:`.streamjson`), permission asks over its control
channel, the session under the battle's folder.

Exit status: 0 the model finished; 1 it could not (the server, ``maxTurns``, a denied
start); 2 a usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pokeralph_agent.errors import BACKOFF, RETRIES, SessionError, shown_url
from pokeralph_agent.loop import AgentLoop, Outcome
from pokeralph_agent.session import Message, Session, SessionStore
from pokeralph_agent.toolspec import TOOLS
from pokeralph_core.errors import PokeralphError

if TYPE_CHECKING:
    from pokeralph_agent.approve import Unmatched
    from pokeralph_agent.chat import ChatClient, Reply
    from pokeralph_agent.session import ToolCall, ToolResult
    from pokeralph_agent.toolspec import ToolSpec
    from pokeralph_core.config.model import Config
    from pokeralph_core.local_config import LocalAgentConfig
    from pokeralph_core.userdirs import Paths

JSON_VERSION = 1
MAX_BACKOFF = 60.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pokeralph-agent",
        description="A coding agent on a local model (Ollama, LM Studio, llama.cpp, vLLM).",
    )
    p.add_argument("-p", "--prompt", help="what to do (default: read from stdin when piped)")
    p.add_argument("--model", help="the model (default: agent.model)")
    p.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="continue the last session of this folder",
    )
    p.add_argument(
        "--end", action="store_true", help="mark the last session of this folder completed"
    )
    p.add_argument("--json", action="store_true", help="print one JSON result on stdout")
    p.add_argument(
        "--yes", action="store_true", help="allow every call no rule decides (no questions)"
    )
    p.add_argument("-C", "--cwd", type=Path, help="the working directory (default: here)")
    p.add_argument("--api", choices=["ollama", "openai"], help="default: agent.local.api")
    p.add_argument("--base-url", help="default: agent.local.baseUrl")
    p.add_argument("--max-turns", type=int, help="default: agent.local.maxTurns")
    p.add_argument("--context-messages", type=int, help="default: agent.local.contextMessages")
    p.add_argument(
        "--timeout",
        dest="timeout_seconds",  # the agent.local key it sets, as the other flags' names are
        type=float,
        help="seconds (default: agent.local.timeoutSeconds)",
    )
    p.add_argument(
        "--retry-backoff",
        type=float,
        metavar="SECONDS",
        help=f"wait before retrying a model call that could not connect (refused, say) or got "
        f"HTTP 5xx or 429 before any text, doubled at each of the {RETRIES} retries (default "
        f"{BACKOFF:g}); a server that stops sending is not retried",
    )
    p.add_argument("--fetch-webpage", action="store_true", default=None, help="offer fetch_webpage")
    p.add_argument(
        "--no-default-rules", action="store_true", help="do not install the read-only default rules"
    )
    p.add_argument(
        "--install-default-rules", action="store_true", help="install them now, and exit"
    )
    battle = p.add_argument_group("battle mode (run by the daemon)")
    battle.add_argument(
        "--stream-json", action="store_true", help="Claude Code's stream-json on stdin and stdout"
    )
    battle.add_argument(
        "--permission-prompt-tool", choices=["stdio"], help="ask over the control channel"
    )
    battle.add_argument("--permission-mode", choices=["default", "plan"], default="default")
    battle.add_argument("--session-dir", type=Path, help="where the session is kept")
    return p


#: The flag that sets each ``agent.local`` key (and names it in an error).
FLAGS = {
    "api": "--api",
    "base_url": "--base-url",
    "max_turns": "--max-turns",
    "context_messages": "--context-messages",
    "timeout_seconds": "--timeout",
    "fetch_webpage": "--fetch-webpage",
}


class UsageError(Exception):
    """Raised for a command line or configuration that cannot run (exit status 2)."""


def check_backoff(args: argparse.Namespace) -> float:
    backoff: float | None = args.retry_backoff
    if backoff is None:
        return BACKOFF
    if not 0 <= backoff <= MAX_BACKOFF:
        raise UsageError(f"--retry-backoff: must be from 0 to {MAX_BACKOFF:g}, got {backoff:g}")
    return backoff


class Settings:
    def __init__(self, args: argparse.Namespace, cwd: Path) -> None:
        self.cwd = cwd
        self._paths: Paths | None = None
        self.rules: list[Any] = []
        # what a call no rule decides gets at the terminal: as in a battle,
        # permissions.unmatched (--yes allows); in a battle the daemon decides
        self.unmatched: Unmatched = "allow" if args.yes else "ask"
        defaults: dict[str, Any] = {}  # in a battle: agent.local's own defaults
        model = None
        if not args.stream_json:
            config = self._config()
            defaults = config.agent.local.model_dump()
            model = config.agent.model
            self.rules = list(config.approval_rules)
            if not args.yes:
                self.unmatched = config.permissions.unmatched
        self.model: str | None = args.model or model
        # the config's agent.local, or its defaults in a battle (the daemon passes every
        # setting as a flag), with the flags on top
        local = self._local(args, defaults)
        self.api: str = local.api
        self.base_url: str = local.base_url  # without a trailing "/"
        self.api_key: str | None = local.api_key
        self.max_turns: int = local.max_turns
        self.context: int = local.context_messages
        self.timeout: float = local.timeout_seconds
        self.fetch: bool = local.fetch_webpage
        self.default_rules: bool = not args.no_default_rules and local.default_rules
        self.backoff = check_backoff(args)

    @property
    def paths(self) -> Paths:
        """The user's folders, found when first needed (a battle given --session-dir
        never needs them)."""
        if self._paths is None:
            from pokeralph_core.userdirs import Paths

            self._paths = Paths.resolve()
        return self._paths

    @staticmethod
    def _local(args: argparse.Namespace, defaults: dict[str, Any]) -> LocalAgentConfig:
        """``defaults`` with the flags given on top, checked as the config is (the same
        ranges and URL check; a flag of 0 is an error, not the default)."""
        from pydantic import ValidationError

        from pokeralph_core.local_config import LocalAgentConfig

        given = {key: getattr(args, key) for key in FLAGS}  # each flag's dest is its key
        given = {key: value for key, value in given.items() if value is not None}
        try:
            return LocalAgentConfig.model_validate({**defaults, **given})
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error["loc"] else ""
            flag = FLAGS.get(field, f"agent.local.{field}")
            raise UsageError(f"{flag}: {error['msg']}") from None

    def _config(self) -> Config:
        # the layers read as the daemon reads them (trust included), from the shared core
        from pokeralph_core.config.layers import load

        repo_file = None
        for folder in (self.cwd, *self.cwd.parents):
            if (folder / ".pokeralph" / "config.json").is_file():
                repo_file = folder / ".pokeralph" / "config.json"
                break
        try:
            return load(self.paths.user_config_file, repo_file).config
        except PokeralphError as exc:
            raise UsageError(f"the configuration cannot be used: {exc.message}") from None

    def client(self, api_key: str | None = None) -> ChatClient:
        cls: type[ChatClient]
        if self.api == "ollama":
            from pokeralph_agent.ollama_chat import OllamaClient as cls
        else:
            from pokeralph_agent.openai_chat import OpenAIClient as cls
        assert self.model
        return cls(
            self.base_url,
            self.model,
            timeout=self.timeout,
            api_key=api_key or self.api_key,
            backoff=self.backoff,
        )


class HumanEvents:
    """The terminal: the model's words on stdout as they come, tool calls on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.calls: list[tuple[ToolCall, ToolResult]] = []
        self._line_open = False

    def text(self, piece: str) -> None:
        if not self.quiet:
            sys.stdout.write(piece)
            sys.stdout.flush()
            self._line_open = not piece.endswith("\n")

    def assistant(self, message: Message, reply: Reply) -> None:
        if self._line_open and not self.quiet:
            sys.stdout.write("\n")
            self._line_open = False
        for note in reply.notes:
            sys.stderr.write(f"[{note}]\n")
        for call in message.tool_calls:
            sys.stderr.write(f"» {call.tool_name} {_brief(call.parameters)}\n")

    def tool_result(self, call: ToolCall, result: ToolResult, shown: str) -> None:
        self.calls.append((call, result))
        mark = "✓" if result.success else "✗"
        detail = result.error or f"{shown.count(chr(10)) + 1} lines"
        sys.stderr.write(f"  {mark} {detail[:200]}\n")


def _brief(parameters: Any) -> str:
    if isinstance(parameters, dict):
        for key in ("command", "path", "pattern", "query", "url"):
            if isinstance(parameters.get(key), str):
                return str(parameters[key]).replace("\n", " ")[:160]
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cwd = Path(os.path.realpath(args.cwd or os.getcwd()))
        if not cwd.is_dir():
            raise UsageError(f"{cwd} is not a directory")
        return anyio.run(run, args, cwd)
    except UsageError as exc:
        _fail(args, "usage", str(exc))
        return 2
    except SessionError as exc:
        _fail(args, "no_session", exc.message)
        return 2
    except KeyboardInterrupt:
        return 130


def _fail(args: argparse.Namespace, code: str, message: str) -> None:
    if args.json:
        print(
            json.dumps(
                {"version": JSON_VERSION, "ok": False, "error": {"code": code, "message": message}}
            )
        )
    else:
        print(f"pokeralph-agent: {message}", file=sys.stderr)


async def run(args: argparse.Namespace, cwd: Path) -> int:
    settings = Settings(args, cwd)
    # In a battle the daemon installs them at its start and decides every call with them;
    # here a person's own runs ask the daemon to (it is the one writer of the user's config)
    if args.install_default_rules or (settings.default_rules and not args.stream_json):
        await anyio.to_thread.run_sync(_default_rules, args, settings)
        if args.install_default_rules:
            return 0
    if args.stream_json:
        return await _battle(args, settings)
    return await _standalone(args, settings)


def _default_rules(args: argparse.Namespace, settings: Settings) -> None:
    """Have the daemon install the read-only default rules not offered yet; without a
    daemon, those apply to this run only (``--install-default-rules``: an error)."""
    from pokeralph_agent.daemon_link import DaemonLink, LinkError
    from pokeralph_core import documents
    from pokeralph_core.local_defaults import DEFAULT_RULES, STATE_FILE, STATE_KIND

    try:
        added = DaemonLink(settings.paths.socket).install_defaults()
    except LinkError as exc:
        if args.install_default_rules:
            raise UsageError(f"the default rules were not installed: {exc.message}") from None
        try:  # reading the daemon's state file: which defaults were offered before
            state = documents.load(STATE_KIND, settings.paths.state_dir / STATE_FILE)
        except PokeralphError:
            state = None
        since = state.value.default_rules_installed if state is not None else 0
        held = {rule.id for rule in settings.rules}
        pending = [r for n, r in DEFAULT_RULES if n > since and r.id not in held]
        settings.rules += pending
        if pending and not args.json:
            print(
                f"pokeralph-agent: read-only default rules for this run only ({exc.message}; "
                "start pokeralphd to keep them)",
                file=sys.stderr,
            )
        return
    settings.rules += [rule for _, rule in DEFAULT_RULES if rule.id in added]
    if added and not args.stream_json:
        print(
            f"pokeralph-agent: read-only default rules added to your rules: {', '.join(added)} "
            "(remove one with `pokeralphctl rules rm ID`)",
            file=sys.stderr,
        )


def _tools(settings: Settings, plan: bool) -> list[ToolSpec]:
    tools = [t for t in TOOLS if settings.fetch or t.name != "fetch_webpage"]
    if plan:
        tools = [t for t in tools if t.risk == "read_only"]
    return tools


def _new_session(settings: Settings, tools: list[ToolSpec], plan: bool) -> Session:
    from pokeralph_agent.prompts import system_prompt

    assert settings.model
    session = Session(
        working_dir=str(settings.cwd),
        model=settings.model,
        api="openai" if settings.api == "openai" else "ollama",
        base_url=shown_url(settings.base_url),  # a login's password is kept out of the file
    )
    session.messages.append(
        Message(role="system", content=system_prompt(str(settings.cwd), tools, plan))
    )
    return session


async def _until_signal(scope: anyio.CancelScope, stopped: list[bool]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            stopped.append(True)
            scope.cancel()
            return


async def _drive(loop: AgentLoop, session: Session, prompt: str) -> tuple[Outcome, bool]:
    """Run the loop until it ends or a signal stops it (the session is saved either way)."""
    outcome = Outcome("end_turn")
    stopped: list[bool] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_until_signal, tg.cancel_scope, stopped)
        await loop.run(session, prompt, outcome)
        tg.cancel_scope.cancel()
    if stopped:
        outcome.stop_reason = "stopped"
        outcome.error = "stopped by a signal"
    return outcome, bool(stopped)


async def _battle(args: argparse.Namespace, settings: Settings) -> int:
    from pokeralph_agent.sandbox import Sandbox
    from pokeralph_agent.streamjson import BattleApprover, HostChannel, StreamJsonOut
    from pokeralph_agent.tools import Toolbox

    if not settings.model:
        raise UsageError("no model: pass --model")
    plan = args.permission_mode == "plan"
    tools = _tools(settings, plan)
    session = _new_session(settings, tools, plan)
    store = SessionStore(args.session_dir or settings.paths.state_dir / "localagent" / "battle")
    out = StreamJsonOut(sys.stdout.buffer, session)
    channel = HostChannel(out)
    began = time.monotonic()
    prompt = await channel.prompt()
    out.init([t.name for t in tools], args.permission_mode)
    if not prompt.strip():
        outcome = Outcome("error", error="no prompt: stdin held no user message")
        out.result(outcome, 0)
        return 1
    routed = args.permission_prompt_tool == "stdio"
    loop = AgentLoop(
        settings.client(channel.api_key),
        Toolbox(Sandbox(settings.cwd), fetch_enabled=settings.fetch),
        BattleApprover(channel if routed else None, plan),
        out,
        store,
        tools,
        max_turns=settings.max_turns,
        context_messages=settings.context,
    )
    async with anyio.create_task_group() as tg:
        if routed:
            tg.start_soon(channel.read_answers)
        outcome, stopped = await _drive(loop, session, prompt)
        session.stop_reason = outcome.stop_reason
        session.error = outcome.error
        session.status = (
            "paused" if stopped else "errored" if outcome.stop_reason == "error" else "completed"
        )
        store.save(session)
        out.result(outcome, int((time.monotonic() - began) * 1000))
        tg.cancel_scope.cancel()
    return 0 if outcome.stop_reason in ("end_turn", "max_turns") else 1


async def _standalone(args: argparse.Namespace, settings: Settings) -> int:
    from pokeralph_agent.approve import TerminalApprover, open_tty
    from pokeralph_agent.daemon_link import DaemonLink
    from pokeralph_agent.sandbox import Sandbox
    from pokeralph_agent.tools import Toolbox

    store = SessionStore.for_directory(settings.paths.state_dir, settings.cwd)
    if args.end:
        last = store.latest()
        if last is None or last.status == "completed":
            raise SessionError(f"no open session in {settings.cwd}")
        last.status = "completed"
        store.save(last)
        _report(args, last, None, [])
        return 0
    prompt = args.prompt
    if prompt is None and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    if not prompt or not prompt.strip():
        raise UsageError('say what to do: pokeralph-agent -p "…"')
    tools = _tools(settings, plan=False)
    if args.resume:
        session = store.latest()
        if session is None or session.status not in ("paused", "errored"):
            raise SessionError(
                f"no session to continue in {settings.cwd}"
                + (f" (the last one, {session.id}, is {session.status})" if session else "")
            )
        if args.model:
            session.model = args.model
        settings.model = session.model
    else:
        if not settings.model:
            raise UsageError(
                "no model: pass --model (e.g. --model qwen2.5-coder:7b) or set agent.model "
                "in your config"
            )
        session = _new_session(settings, tools, plan=False)
    if settings.unmatched == "allow" and not args.json:
        why = "--yes" if args.yes else "permissions.unmatched is allow"
        print(f"pokeralph-agent: {why}: every call no rule decides is allowed", file=sys.stderr)
    events = HumanEvents(quiet=args.json)
    approver = TerminalApprover(
        settings.rules, settings.unmatched, DaemonLink(settings.paths.socket), open_tty()
    )
    loop = AgentLoop(
        settings.client(),
        Toolbox(Sandbox(settings.cwd), fetch_enabled=settings.fetch),
        approver,
        events,
        store,
        tools,
        max_turns=settings.max_turns,
        context_messages=settings.context,
    )
    outcome, _stopped = await _drive(loop, session, prompt)
    session.stop_reason = outcome.stop_reason
    session.error = outcome.error
    session.status = "errored" if outcome.stop_reason == "error" else "paused"
    store.save(session)
    _report(args, session, outcome, events.calls)
    return 0 if outcome.stop_reason == "end_turn" else 1


def _report(
    args: argparse.Namespace,
    session: Session,
    outcome: Outcome | None,
    calls: list[tuple[ToolCall, ToolResult]],
) -> None:
    if args.json:
        error = None
        if outcome is not None and outcome.stop_reason != "end_turn":
            code = {"max_turns": "max_turns", "stopped": "stopped"}.get(
                outcome.stop_reason, "api_error"
            )
            if outcome.error and outcome.error.startswith("nothing answers"):
                code = "server_unreachable"
            message = outcome.error or f"stopped after {outcome.turns} model replies (maxTurns)"
            error = {"code": code, "message": message}
        print(
            json.dumps(
                {
                    "version": JSON_VERSION,
                    "ok": error is None,
                    "session": {
                        "id": session.id,
                        "status": session.status,
                        "workingDir": session.working_dir,
                        "model": session.model,
                    },
                    "stopReason": outcome.stop_reason if outcome else None,
                    "result": outcome.text if outcome else None,
                    "turns": outcome.turns if outcome else 0,
                    "usage": {
                        "inputTokens": outcome.input_tokens if outcome else 0,
                        "outputTokens": outcome.output_tokens if outcome else 0,
                    },
                    "toolCalls": [
                        {
                            "id": call.id,
                            "tool": call.tool_name,
                            "parameters": call.parameters,
                            "status": call.status,
                            "approvalMethod": call.approval_method,
                            "success": result.success,
                            "error": result.error,
                            "filesAffected": result.files_affected,
                        }
                        for call, result in calls
                    ],
                    "error": error,
                },
                ensure_ascii=False,
            )
        )
        return
    if outcome is None:
        print(f"session {session.id} is {session.status}", file=sys.stderr)
        return
    if outcome.stop_reason == "error":
        print(f"pokeralph-agent: {outcome.error}", file=sys.stderr)
    elif outcome.stop_reason == "max_turns":
        print(
            f"pokeralph-agent: stopped after {outcome.turns} model replies (maxTurns); "
            "`pokeralph-agent --continue` goes on",
            file=sys.stderr,
        )
    print(
        f"[session {session.id}: {session.status}; `pokeralph-agent --continue -p …` to go on]",
        file=sys.stderr,
    )
