"""What an ACP agent's messages mean to pokeralph: ``session/update`` notifications as our
agent events, a ``session/request_permission`` as our permission request, our answer as
one of the options the agent offered, and the ``session/prompt`` answer as the run's result.

- ``agent_message_chunk`` (text): the agent's own words (:class:`AgentText`), the only
  place the completion signal is looked for; ``agent_thought_chunk`` shows nothing (it is
  in the log); ``plan``: a notice listing the entries with their status.
- ``tool_call`` / ``tool_call_update``: one :class:`ToolCalls` entry per ``toolCallId``,
  merged as updates come (only changed fields are sent; an agent that sends no
  ``rawInput``, as Gemini CLI, has its call described instead: :func:`described`); a call opens as an
  :class:`AgentToolUse` named by its ``kind`` (``read``, ``edit``, ``delete``, ``move``,
  ``search``, ``execute``, ``think``, ``fetch``, ``other``) with its ``rawInput``, and ends
  (``completed``/``failed``) as an :class:`AgentToolResult` whose files are the call's
  ``locations`` when it changes files (``edit``, ``delete``, ``move``).
- ``usage_update`` with a ``cost`` in USD: the session's cost so far; an update's
  ``_meta.usage`` (Qwen Code reports each model call's so): added up, the run's usage
  when the ``session/prompt`` answer carries none.
- Anything else known (commands, modes, session info) shows nothing; unknown kinds are
  notices.

Every text kept is bounded (:data:`MAX_TEXT`); the whole message is in the iteration's log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pokeralphd.agents.base import (
    AgentEvent,
    AgentNotice,
    AgentPermissionRequest,
    AgentResult,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    PermissionAnswer,
)
from pokeralphd.domain.models import Usage

MAX_TEXT = 200_000  # characters of one text chunk or tool output kept
MAX_CALLS = 2000  # tool calls remembered per run (their kinds and inputs)
MAX_LOCATIONS = 100  # files of one call
MAX_DESCRIBED = 64_000  # characters of a text or a diff in a call described for the rules
WRITING_KINDS = frozenset({"edit", "delete", "move"})
#: What a planning run (nothing may change) allows without asking anyone.
READING_KINDS = frozenset({"read", "search", "think"})
QUIET_UPDATES = frozenset(
    {
        "user_message_chunk",
        "agent_thought_chunk",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
    }
)
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


@dataclass
class _Call:
    kind: str = "other"
    title: str = ""
    raw_input: dict[str, Any] | None = None
    locations: list[str] = field(default_factory=list)
    opened: bool = False
    ended: bool = False


@dataclass
class ToolCalls:
    """The run's tool calls, by id, as the updates build them."""

    calls: dict[str, _Call] = field(default_factory=dict)
    cost_usd: float | None = None
    usage: Usage | None = None  # summed from updates' ``_meta.usage`` (Qwen Code's)

    def update(self, params: Any) -> list[AgentEvent]:
        """The events of one ``session/update`` notification's params."""
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return [AgentNotice("a session/update without an update")]
        kind = update.get("sessionUpdate")
        meta = update.get("_meta")
        if isinstance(meta, dict) and (reported := usage_of(meta.get("usage"))) is not None:
            self.usage = reported if self.usage is None else _add(self.usage, reported)
        if kind == "agent_message_chunk":
            text = _content_text(update.get("content"))
            return [AgentText(text[:MAX_TEXT])] if text else []
        if kind in ("tool_call", "tool_call_update"):
            return self._tool(update)
        if kind == "plan":
            return [AgentNotice(plan_text(update.get("entries")))]
        if kind == "usage_update":
            cost = update.get("cost")
            if isinstance(cost, dict) and cost.get("currency") == "USD":
                amount = cost.get("amount")
                if isinstance(amount, int | float) and not isinstance(amount, bool) and amount >= 0:
                    self.cost_usd = float(amount)
            return []
        if kind in QUIET_UPDATES:
            return []
        return [AgentNotice(f"session/update {str(kind)[:80]!r} not handled")]

    def _tool(self, update: dict[str, Any]) -> list[AgentEvent]:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            return [AgentNotice("a tool call without a toolCallId")]
        call_id = call_id[:200]
        call = self.calls.get(call_id)
        if call is None:
            if len(self.calls) >= MAX_CALLS:
                return []
            call = self.calls[call_id] = _Call()
        self._merge(call, update)
        out: list[AgentEvent] = []
        status = update.get("status")
        # Opened once its input is known (Qwen Code sends it empty first, then whole in
        # the permission request), or once it runs.
        if not call.opened and (call.raw_input or status in ("in_progress", "completed", "failed")):
            call.opened = True
            out.append(AgentToolUse(call.kind, call.title[:200], call_id, call.raw_input or {}))
        if status in ("completed", "failed") and not call.ended:
            call.ended = True
            failed = status == "failed"
            out.append(
                AgentToolResult(
                    _tool_output(update)[:MAX_TEXT],
                    failed,
                    call_id,
                    files=() if failed or call.kind not in WRITING_KINDS else tuple(call.locations),
                )
            )
        return out

    def _merge(self, call: _Call, update: dict[str, Any]) -> None:
        kind = update.get("kind")
        if isinstance(kind, str) and kind:
            call.kind = kind[:40]
        title = update.get("title")
        if isinstance(title, str):
            call.title = title.replace("\n", " ")[:500]
        raw = update.get("rawInput")
        if isinstance(raw, dict):
            call.raw_input = raw
        locations = update.get("locations")
        if isinstance(locations, list):
            call.locations = [
                loc["path"]
                for loc in locations[:MAX_LOCATIONS]
                if isinstance(loc, dict) and isinstance(loc.get("path"), str)
            ]

    def permission_request(self, request_id: int | str, params: Any) -> AgentPermissionRequest:
        """A ``session/request_permission`` as our request: the tool name is the call's
        ``kind``, its input the call's ``rawInput`` (what approval rules match), merged
        with what earlier updates said of the same call."""
        if not isinstance(params, dict) or not isinstance(params.get("toolCall"), dict):
            raise ValueError("session/request_permission without a toolCall")
        update = params["toolCall"]
        call_id = update.get("toolCallId")
        call = self.calls.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            call = _Call()
            if isinstance(call_id, str) and call_id and len(self.calls) < MAX_CALLS:
                self.calls[call_id[:200]] = call
        self._merge(call, update)
        call.opened = True  # the decision opens it in the tool call log
        return AgentPermissionRequest(
            str(request_id),
            call.kind,
            call.raw_input or described(call, update),
            call.title,
            call_id[:200] if isinstance(call_id, str) and call_id else None,
        )


def described(call: _Call, update: dict[str, Any]) -> dict[str, Any]:
    """What rules match when an agent sends no ``rawInput`` (Gemini CLI 0.61): the call's
    ``title`` (a command line, for ``execute``), the ``paths`` of its ``locations``, and
    its content: text, and each diff's ``path`` and ``newText``."""
    described: dict[str, Any] = {"title": call.title}
    if call.locations:
        described["paths"] = call.locations
    texts: list[str] = []
    diffs: list[dict[str, Any]] = []
    content = update.get("content")
    for item in content[:20] if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "content" and (text := _content_text(item.get("content"))):
            texts.append(text[:MAX_DESCRIBED])
        elif item.get("type") == "diff" and isinstance(item.get("path"), str):
            new = item.get("newText")
            diffs.append(
                {
                    "path": item["path"],
                    "newText": new[:MAX_DESCRIBED] if isinstance(new, str) else None,
                }
            )
    if texts:
        described["text"] = "\n".join(texts)
    if diffs:
        described["diffs"] = diffs
    return described


def choose_option(options: Any, answer: PermissionAnswer) -> dict[str, Any]:
    """The outcome answering a permission request: the option the agent offered for our
    answer (allow: ``allow_once``, else ``allow_always``; deny: ``reject_once``, else
    ``reject_always``). Never ``allow_always`` when ``allow_once`` is offered: the agent
    would then stop asking, and our rules (a person's "allow always" included) are the
    ones that remember. No fitting option: ``cancelled``."""
    wanted = ("allow_once", "allow_always") if answer.allow else ("reject_once", "reject_always")
    offered = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
    for kind in wanted:
        for option in offered:
            option_id = option.get("optionId")
            if option.get("kind") == kind and isinstance(option_id, str):
                return {"outcome": "selected", "optionId": option_id}
    return {"outcome": "cancelled"}


def result_of(
    answer: Any,
    session_id: str | None,
    cost_usd: float | None,
    last_text: str,
    streamed: Usage | None = None,
) -> AgentResult:
    """The ``session/prompt`` answer as the run's result: its ``stopReason`` as the
    subtype (a ``refusal``, or an unknown reason, is an error), its usage when reported
    (the answer's ``usage`` or ``_meta.usage``, else what the updates said: ``streamed``);
    None, "not reported", when nothing said it."""
    reason = answer.get("stopReason") if isinstance(answer, dict) else None
    usage = usage_of(answer.get("usage") if isinstance(answer, dict) else None)
    if usage is None and isinstance(answer, dict) and isinstance(answer.get("_meta"), dict):
        usage = usage_of(answer["_meta"].get("usage"))
    if usage is None and isinstance(answer, dict) and isinstance(answer.get("_meta"), dict):
        usage = _quota_usage(answer["_meta"].get("quota"))
    usage = usage or streamed
    known = reason in STOP_REASONS
    is_error = not known or reason == "refusal"
    if not known:
        text = f"the agent ended its turn with an unknown stopReason: {str(reason)[:80]!r}"
    elif reason == "refusal":
        text = "the agent refused to continue (stopReason refusal)"
    else:
        text = last_text
    return AgentResult(
        text=text,
        is_error=is_error,
        subtype=reason if known else None,
        cost_usd=cost_usd,
        usage=usage,
        num_turns=None,
        duration_ms=None,
        session_id=session_id,
    )


def usage_of(raw: Any) -> Usage | None:
    """ACP's ``Usage`` (``inputTokens``, ``outputTokens``, ``cachedReadTokens``,
    ``cachedWriteTokens``, ``thoughtTokens``), when the agent reports it; else None."""
    if not isinstance(raw, dict):
        return None
    numbers = {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
    if "inputTokens" not in numbers and "outputTokens" not in numbers:
        return None
    return Usage(
        input_tokens=max(0, numbers.get("inputTokens", 0)),
        output_tokens=max(0, numbers.get("outputTokens", 0)),
        cache_creation_input_tokens=max(0, numbers.get("cachedWriteTokens", 0)),
        cache_read_input_tokens=max(0, numbers.get("cachedReadTokens", 0)),
        reasoning_output_tokens=max(0, numbers.get("thoughtTokens", 0)),
    )


def _quota_usage(quota: Any) -> Usage | None:
    """Gemini CLI's ``_meta.quota.token_count`` (``input_tokens``, ``output_tokens``)."""
    count = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(count, dict):
        return None
    return usage_of(
        {"inputTokens": count.get("input_tokens"), "outputTokens": count.get("output_tokens")}
    )


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
        reasoning_output_tokens=a.reasoning_output_tokens + b.reasoning_output_tokens,
    )


def plan_text(entries: Any) -> str:
    lines = ["plan:"]
    for entry in entries[:50] if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            status = str(entry.get("status") or "pending")[:20]
            lines.append(f"  [{status}] {str(entry.get('content') or '')[:300]}")
    return "\n".join(lines)


def _content_text(content: Any) -> str:
    if isinstance(content, dict) and content.get("type") == "text":
        text = content.get("text")
        return text if isinstance(text, str) else ""
    return ""


def _tool_output(update: dict[str, Any]) -> str:
    """A finished call's output: its text content (diffs as their path), else its
    ``rawOutput``."""
    parts: list[str] = []
    content = update.get("content")
    for item in content[:100] if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "content":
            parts.append(_content_text(item.get("content")))
        elif item.get("type") == "diff" and isinstance(item.get("path"), str):
            parts.append(f"diff of {item['path']}")
    text = "\n".join(p for p in parts if p)
    if not text and "rawOutput" in update:
        raw = update["rawOutput"]
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)[:MAX_TEXT]
    return text
