"""The Codex CLI's non-interactive JSON mode: ``codex exec --json``, prompt on stdin (``-``).

Events: ``thread.started`` (the session), ``item.started``/``item.completed`` with items
``agent_message`` (the agent's words), ``command_execution``, ``file_change``,
``reasoning``, ``error``…; a turn ends with ``turn.completed`` (usage; no cost field) or
``turn.failed``; a top-level ``error`` reports stream failures.
"""

from __future__ import annotations

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
    json_events,
)
from pokeralphd.agents.claude import usage_of


class CodexBackend(AgentBackend):
    name = "codex"
    default_command = "codex"

    def __init__(self) -> None:
        self._last_message = ""
        self._thread: str | None = None

    def argv(self, request: AgentRequest) -> list[str]:
        """``codex exec --json --sandbox MODE -c … [-m MODEL] [EXTRA…] [resume ID] -``.

        What is passed, and why (codex 0.1xx; ``--sandbox`` is an option of ``exec``
        itself, not of its ``resume`` subcommand, so every option comes before ``resume``):

        - ``--sandbox workspace-write`` to execute: without ``--sandbox``, ``exec`` runs
          read-only and every write fails with "Read-only file system" while the agent
          reports success. ``--sandbox read-only`` to plan: nothing may be written.
        - ``-c sandbox_workspace_write.network_access=false``: the sandboxed commands get
          no network (the default, stated so a user's config.toml cannot turn it on); the
          CLI's own calls to the model endpoint are not sandboxed and still work.
        - ``-c web_search="disabled"``: the model gets no web search tool (no fetching
          beyond the model endpoint).
        - not ``--skip-git-repo-check``: a battle runs in a registered git repository, and
          the check is what keeps a writing agent out of a folder with no history to undo.
        - not ``--dangerously-bypass-approvals-and-sandbox``: ``exec`` never asks for
          approval, and the sandbox is the only limit the agent has.

        ``agent.extraArgs`` come after ours: a user who wants another policy can say so.
        """
        cfg = request.config
        argv = [
            self.executable(request),
            "exec",
            "--json",
            "--sandbox",
            "read-only" if request.mode == "plan" else "workspace-write",
            "-c",
            "sandbox_workspace_write.network_access=false",
            "-c",
            'web_search="disabled"',
        ]
        if cfg.model:
            argv += ["-m", cfg.model]
        argv += list(cfg.extra_args)
        if request.resume_session:
            argv += ["resume", request.resume_session]
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
            self._thread = event.get("thread_id")
            return [AgentStarted(self._thread, None, 0)]
        if kind == "turn.started":
            return []
        if kind == "item.started":
            if item.get("type") == "command_execution":
                command = str(item.get("command", ""))
                return [AgentToolUse("shell", command[:200], _id(item), {"command": command})]
            return []
        if kind == "item.completed":
            itype = item.get("type")
            if itype == "agent_message":
                text = str(item.get("text", ""))
                self._last_message = text
                return [AgentText(text)]
            if itype == "command_execution":
                failed = item.get("exit_code") not in (0, None)
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
                # error ends the turn with turn.failed or a top-level error event.
                return [AgentNotice(f"codex warning: {item.get('message', '')}")]
            if itype in ("reasoning", "todo_list", "web_search", "mcp_tool_call"):
                return [
                    AgentToolUse(str(itype), str(item.get("text", item.get("query", "")))[:200])
                ]
            return [AgentNotice(f"item {itype!r}")]
        if kind == "turn.completed":
            return [
                AgentResult(
                    self._last_message,
                    False,
                    "success",
                    None,
                    usage_of(_codex_usage(event.get("usage"))),
                    None,
                    None,
                    self._thread,
                )
            ]
        if kind == "turn.failed":
            err = event.get("error") or {}
            message = err.get("message") if isinstance(err, dict) else str(err)
            return [
                AgentResult(
                    str(message or "turn failed"),
                    True,
                    "turn.failed",
                    None,
                    None,
                    None,
                    None,
                    self._thread,
                )
            ]
        if kind == "error":
            return [AgentNotice(f"stream error: {event.get('message', '')}")]
        return [AgentNotice(f"unknown event type {kind!r}")]


def _codex_usage(raw: Any) -> dict[str, Any] | None:
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


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _id(item: dict[str, Any]) -> str | None:
    value = item.get("id")
    return value[:200] if isinstance(value, str) and value else None
