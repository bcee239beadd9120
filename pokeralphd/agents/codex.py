"""The Codex CLI's non-interactive JSON mode: ``codex exec --json``, prompt on stdin (``-``).

Events (checked against the real CLI 0.169, tests/fakes/CODEX-FACTS.md): ``thread.started``
(the session), ``item.started``/``item.completed`` with items ``agent_message`` (the
agent's words), ``command_execution``, ``file_change``, ``reasoning``, ``error`` (non-fatal,
e.g. unknown model metadata, printed even before ``turn.started``)…; a turn ends with
``turn.completed`` (usage: the thread's running total; no cost field) or ``turn.failed``;
a top-level ``error`` reports each of the CLI's own retries ("Reconnecting... 1/5 (…)")
and then repeats the fatal message that ``turn.failed`` carries.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

from pokeralphd.agents.base import (
    AgentBackend,
    AgentEvent,
    AgentNotice,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    Flag,
    json_events,
    merge_flags,
)
from pokeralphd.agents.claude import usage_of
from pokeralphd.sandbox.backends import CONFINED_ENV

# What keeps Codex off every host but the model endpoint (measured with 0.169 through a
# refusing proxy, tests/real/test_real_codex.py): each ``exec`` otherwise syncs the plugin
# marketplace (``git ls-remote https://github.com/openai/plugins.git``, api.github.com,
# chatgpt.com) and sends analytics/metrics to ab.chatgpt.com. None of them is the model
# endpoint, so a real OpenAI or ChatGPT login works the same without them.
QUIET_OVERRIDES = (
    "features.plugins=false",
    "analytics.enabled=false",
    'otel.metrics_exporter="none"',
)


class CodexBackend(AgentBackend):
    name = "codex"
    default_command = "codex"

    def __init__(self) -> None:
        self._last_message = ""
        self._thread: str | None = None
        self._resumed_from: dict[str, int] | None = None

    def argv(self, request: AgentRequest) -> list[str]:
        """``codex exec --json --sandbox MODE -c … [-m MODEL] [EXTRA…] [resume ID] -``.

        What is passed, and why (codex 0.169; ``--sandbox`` is an option of ``exec``
        itself, not of its ``resume`` subcommand, so every option comes before ``resume``):

        - ``--sandbox workspace-write`` to execute: without ``--sandbox``, ``exec`` runs
          read-only and every write fails with "Read-only file system" while the agent
          reports success. ``--sandbox read-only`` to plan: nothing may be written.
        - ``--sandbox danger-full-access`` in both modes when the daemon's own sandbox
          confines the run (``POKERALPH_SANDBOX`` in the run's environment, which the
          daemon sets and ``agent.env`` cannot): ours hides $HOME and the secrets, makes
          the tree read-only to plan, and lets the allowed hosts through its proxy,
          where Codex's own bubblewrap, nested, would cut every command off the proxy
          (its network-off namespace) and fails outright when ``CODEX_HOME`` is under a
          temporary folder (docs/sandbox.md).
        - ``-c sandbox_workspace_write.network_access=false``: the sandboxed commands get
          no network (the default, stated so a user's config.toml cannot turn it on); the
          CLI's own calls to the model endpoint are not sandboxed and still work.
        - ``-c web_search="disabled"``: the model gets no web search tool (no fetching
          beyond the model endpoint).
        - ``-c features.plugins=false -c analytics.enabled=false -c
          otel.metrics_exporter="none"`` (:data:`QUIET_OVERRIDES`): no plugin marketplace
          sync, no analytics, no metrics; the CLI then talks to the model endpoint only.
        - not ``--skip-git-repo-check``: a battle runs in a registered git repository, and
          the check is what keeps a writing agent out of a folder with no history to undo.
        - not ``--dangerously-bypass-approvals-and-sandbox``: ``exec`` never asks for
          approval, and the sandbox is the only limit the agent has.

        ``agent.extraArgs`` come after ours (a later ``-c`` wins), and a ``--sandbox`` or
        ``--model`` of theirs replaces ours (:func:`~pokeralphd.agents.base.merge_flags`).
        """
        cfg = request.config
        if request.env.get(CONFINED_ENV):
            sandbox = "danger-full-access"
        else:
            sandbox = "read-only" if request.mode == "plan" else "workspace-write"
        argv = [
            self.executable(request),
            "exec",
            "--json",
            "-c",
            "sandbox_workspace_write.network_access=false",
            "-c",
            'web_search="disabled"',
        ]
        for override in QUIET_OVERRIDES:
            argv += ["-c", override]
        defaults = [Flag(("--sandbox", "-s"), (sandbox,))]
        if cfg.model:
            defaults.append(Flag(("-m", "--model"), (cfg.model,)))
        # A user's own --sandbox or --model replaces ours (passing both is exit 2).
        argv += merge_flags(defaults, cfg.extra_args)
        if request.resume_session:
            argv += ["resume", request.resume_session]
            self._resumed_from = _THREAD_TOTALS.get(request.resume_session)
        argv.append(request.prompt if cfg.prompt_via == "argument" else "-")
        return argv

    def missing_hint(self) -> str:
        return "install the Codex CLI (`npm install -g @openai/codex`) or set agent.command to its path"

    def parse_line(self, line: bytes) -> list[AgentEvent]:
        return json_events(line, self._parse)

    def _parse(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event.get("type")
        raw_item = event.get("item")
        item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        if kind == "thread.started":
            thread = event.get("thread_id")
            self._thread = thread[:200] if isinstance(thread, str) and thread else None
            return [AgentStarted(self._thread, None, 0)]
        if kind == "turn.started":
            return []
        if kind == "item.started":
            if item.get("type") == "command_execution":
                command = str(item.get("command", ""))
                return [AgentToolUse("shell", command[:200], _id(item), {"command": command})]
            return []
        if kind == "item.updated":
            return []  # a to-do list's progress; its final state comes with item.completed
        if kind == "item.completed":
            return self._item(item)
        if kind == "turn.completed":
            return [
                AgentResult(
                    self._last_message,
                    False,
                    "success",
                    None,
                    usage_of(self._turn_usage(event.get("usage"))),
                    None,
                    None,
                    self._thread,
                )
            ]
        if kind == "turn.failed":
            err = event.get("error") or {}
            message = str((err.get("message") if isinstance(err, dict) else err) or "turn failed")
            status, error_type = api_error_of(message)
            return [
                AgentResult(
                    message,
                    True,
                    "turn.failed",
                    None,
                    None,
                    None,
                    None,
                    self._thread,
                    status,
                    error_type,
                )
            ]
        if kind == "error":
            # Each of the CLI's own retries ("Reconnecting... 2/5 (…)"), then the fatal
            # message again right before turn.failed: news, never the outcome itself.
            return [AgentNotice(f"codex: {str(event.get('message', ''))[:2000]}")]
        return [AgentNotice(f"unknown event type {kind!r}")]

    def _item(self, item: dict[str, Any]) -> list[AgentEvent]:
        itype = item.get("type")
        if itype == "agent_message":
            text = str(item.get("text", ""))
            self._last_message = text
            return [AgentText(text)]
        if itype == "command_execution":
            failed = item.get("status") in ("failed", "declined") or item.get("exit_code") not in (
                0,
                None,
            )
            output = str(item.get("aggregated_output", ""))
            return [AgentToolResult(output, failed, _id(item))]
        if itype == "file_change":
            # Reported once applied (or not): the call and its result at once.
            changes = item.get("changes") or []
            paths = ", ".join(str(c.get("path", "")) for c in changes if isinstance(c, dict))
            failed = item.get("status") == "failed"
            return [
                AgentToolUse("file_change", paths[:200], _id(item), {"changes": changes}),
                AgentToolResult(
                    f"{'failed to change' if failed else 'changed'} {paths}"[:2000],
                    failed,
                    _id(item),
                ),
            ]
        if itype == "error":
            # Non-fatal (e.g. unknown model metadata): the turn goes on; a fatal
            # error ends the turn with turn.failed.
            return [AgentNotice(f"codex warning: {str(item.get('message', ''))[:2000]}")]
        if itype == "reasoning":
            return [AgentNotice(f"reasoning: {str(item.get('text', ''))[:2000]}")]
        if itype == "todo_list":
            todo = item.get("items") or []
            done = sum(1 for t in todo if isinstance(t, dict) and t.get("completed"))
            return [AgentNotice(f"to-do list: {done}/{len(todo)} done")]
        if itype in ("web_search", "mcp_tool_call", "collab_tool_call"):
            what = item.get("query") or item.get("tool") or ""
            return [AgentToolUse(str(itype), str(what)[:200], _id(item))]
        return [AgentNotice(f"item {itype!r}")]

    def _turn_usage(self, raw: Any) -> dict[str, Any] | None:
        """This run's usage. ``turn.completed`` reports the thread's running total, so a
        resumed thread's earlier runs are taken off (when this daemon saw them)."""
        total = _codex_usage(raw)
        if total is None:
            return None
        if self._thread:
            _remember(self._thread, total)
        before = self._resumed_from
        if before is None:
            return total
        return {k: max(v - before.get(k, 0), 0) for k, v in total.items()}


# thread id → the last running total seen, so a resumed thread's run counts only itself.
# Bounded: the oldest threads are forgotten (a resume of one then counts its history once).
_THREAD_TOTALS: OrderedDict[str, dict[str, int]] = OrderedDict()
_TOTALS_LOCK = threading.Lock()
MAX_THREADS = 256


def _remember(thread: str, total: dict[str, int]) -> None:
    with _TOTALS_LOCK:
        _THREAD_TOTALS[thread] = total
        _THREAD_TOTALS.move_to_end(thread)
        while len(_THREAD_TOTALS) > MAX_THREADS:
            _THREAD_TOTALS.popitem(last=False)


def _codex_usage(raw: Any) -> dict[str, int] | None:
    """OpenAI's usage in Anthropic's terms: OpenAI's ``input_tokens`` include the cached
    ones (Anthropic's do not), so the uncached input is ``input - cached``; a cache write
    is Anthropic's cache creation; reasoning tokens are a part of ``output_tokens``."""
    if not isinstance(raw, dict):
        return None
    total = _count(raw.get("input_tokens"))
    cached = min(_count(raw.get("cached_input_tokens")), total)
    return {
        "input_tokens": total - cached,
        "output_tokens": _count(raw.get("output_tokens")),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": _count(raw.get("cache_write_input_tokens")),
        "reasoning_output_tokens": _count(raw.get("reasoning_output_tokens")),
    }


# How codex 0.169 words a failed model call in turn.failed (codex-rs CodexErr's Display):
# "exceeded retry limit, last status: 429 Too Many Requests, request id: …" (its own
# retries spent), "unexpected status 502 Bad Gateway: <body message>, url: …".
_STATUS = re.compile(r"(?:last status:|unexpected status)\s+([1-5]\d\d)\b")
# Messages without a status, each the CLI's wording of one transient API failure.
_TRANSIENT = (
    ("rate limit exceeded:", "rate_limit_error"),  # response.failed rate_limit_exceeded
    ("you've hit your usage limit", "rate_limit_error"),  # a ChatGPT plan's window
    ("selected model is at capacity", "overloaded_error"),
    ("currently experiencing high demand", "server_error"),  # an HTTP 500
    ("stream disconnected before completion", "server_error"),
    ("error while reading the server response", "server_error"),
    ("connection failed:", "server_error"),
)


def api_error_of(message: str) -> tuple[int | None, str | None]:
    """The HTTP status and the error type a ``turn.failed`` message names (see
    ``runner.classify_api_failure``): 429/5xx and the CLI's words for a rate limit, an
    overload or a server failure are transient; anything else (a 401, a bad request, a
    missing key, out of quota or credits) is the run's failure."""
    if found := _STATUS.search(message):
        return int(found.group(1)), None
    lowered = message.lower().replace("\u2019", "'")
    for words, error_type in _TRANSIENT:
        if words in lowered:
            return None, error_type
    return None, None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _id(item: dict[str, Any]) -> str | None:
    value = item.get("id")
    return value[:200] if isinstance(value, str) and value else None
