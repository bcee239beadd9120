"""The tool calls of one iteration, as seed 001's ToolCall and ToolResult records.

Built from the agent's events: a ``tool_use`` opens a call (pending); our answer to the
agent's permission ask approves or rejects it (by a rule, a person, or the policy); a
refusal the agent made on its own (Claude Code's ``permission_denied``) rejects it; the
tool's result ends it as executed or failed, with the files it changed (those the agent
names, as ACP's ``locations``, else those its input names). A call that ran without an ask was approved
by the agent itself (``auto``). At most :data:`MAX_TOOL_CALLS` calls are kept per
iteration (the rest are counted); inputs and outputs are trimmed here and whole in the
iteration's log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pokeralph_core.approval import canonical
from pokeralph_core.timeutil import utcnow
from pokeralphd.agents.base import (
    AgentEvent,
    AgentPermissionDecision,
    AgentPermissionDenied,
    AgentToolResult,
    AgentToolUse,
    ApprovalMethod,
)
from pokeralphd.domain.models import (
    MAX_TOOL_CALLS,
    TOOL_INPUT_KEPT,
    TOOL_OUTPUT_KEPT,
    ToolCall,
    ToolCallStatus,
    ToolResult,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime
    from pathlib import Path

# Tools that write the file their input names (Claude Code's; the local agent's).
WRITING_TOOLS = frozenset(
    {
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "create_file",
        "replace_string_in_file",
        "create_directory",
    }
)
PATH_KEYS = ("file_path", "notebook_path", "path", "filePath", "dirPath")


def _trim(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    return text[:keep] + f"… [{len(text) - keep} more characters in the log]"


@dataclass
class _Call:
    id: str
    tool_name: str
    input: dict[str, Any] | None
    requested_at: datetime
    status: ToolCallStatus = "pending"
    approval_method: ApprovalMethod | None = None
    rule_id: str | None = None
    message: str | None = None
    decided_at: datetime | None = None
    executed_at: datetime | None = None
    result: ToolResult | None = None


class ToolCallLog:
    def __init__(self, root: Path, now: Callable[[], datetime] = utcnow) -> None:
        self.root = root
        self.now = now
        self._calls: dict[str, _Call] = {}
        self.omitted = 0
        self._unnamed = 0

    def on_event(self, event: AgentEvent) -> None:
        match event:
            case AgentToolUse(name=name, id=call_id, input=tool_input) if call_id:
                self._open(call_id, name, tool_input)
            case AgentPermissionDecision(request=ask, answer=answer):
                call = self._find(ask.tool_use_id) or self._open(
                    ask.tool_use_id, ask.tool_name, ask.input
                )
                if call is not None and call.status == "pending":
                    call.status = "approved" if answer.allow else "rejected"
                    call.approval_method = answer.method
                    call.rule_id = answer.rule_id
                    call.message = None if answer.allow else (answer.message or "denied")[:2000]
                    call.decided_at = self.now()
            case AgentPermissionDenied(tool_name=name, tool_use_id=call_id, message=message):
                call = self._find(call_id) or self._open(call_id, name, None)
                if call is not None and call.status == "pending":
                    call.status = "rejected"
                    call.approval_method = "auto"  # the agent refused it, nobody was asked
                    call.decided_at = self.now()
                if call is not None and call.status == "rejected" and not call.message:
                    call.message = message or "refused by the agent"
            case AgentToolResult(text=text, is_error=is_error, tool_use_id=call_id, files=named):
                call = self._find(call_id)
                if call is None or call.status in ("rejected", "executed", "failed"):
                    return
                if call.status == "pending":  # ran without asking us
                    call.approval_method = "auto"
                    call.decided_at = call.requested_at
                call.executed_at = self.now()
                call.status = "failed" if is_error else "executed"
                began = call.decided_at or call.requested_at
                call.result = ToolResult(
                    success=not is_error,
                    output=_trim(text, TOOL_OUTPUT_KEPT),
                    error=(_trim(text, TOOL_OUTPUT_KEPT) or "the tool failed")
                    if is_error
                    else None,
                    files_affected=[]
                    if is_error
                    else self._files(call)
                    if named is None
                    else self._within(list(named)),
                    execution_time_ms=max(
                        0, int((call.executed_at - began).total_seconds() * 1000)
                    ),
                )
            case _:
                pass

    def records(self) -> list[ToolCall]:
        return [
            ToolCall(
                id=c.id,
                tool_name=c.tool_name,
                input=_trim(canonical(c.input), TOOL_INPUT_KEPT) if c.input is not None else "",
                status=c.status,
                approval_method=c.approval_method,
                rule_id=c.rule_id,
                message=c.message,
                requested_at=c.requested_at,
                decided_at=c.decided_at,
                executed_at=c.executed_at,
                result=c.result,
            )
            for c in self._calls.values()
        ]

    # -- helpers
    def _find(self, call_id: str | None) -> _Call | None:
        return self._calls.get(call_id) if call_id else None

    def _open(self, call_id: str | None, name: str, tool_input: Any) -> _Call | None:
        if call_id is None:
            self._unnamed += 1
            call_id = f"call-{self._unnamed}"
        known = self._calls.get(call_id)
        if known is not None:
            return known
        if len(self._calls) >= MAX_TOOL_CALLS:
            self.omitted += 1
            return None
        call = _Call(
            call_id,
            name[:200] or "tool",
            tool_input if isinstance(tool_input, dict) else None,
            self.now(),
        )
        self._calls[call_id] = call
        return call

    def _files(self, call: _Call) -> list[str]:
        """The files a writing tool names, relative to the repository (none outside it)."""
        if not call.input:
            return []
        named: list[Any] = []
        if call.tool_name == "file_change":  # Codex: {"changes": [{"path", "kind"}]}
            changes = call.input.get("changes")
            named = (
                [c.get("path") for c in changes if isinstance(c, dict)][:100]
                if isinstance(changes, list)
                else []
            )
        elif call.tool_name in WRITING_TOOLS:
            named = [next((call.input[k] for k in PATH_KEYS if call.input.get(k)), None)]
        return self._within(named)

    def _within(self, named: list[Any]) -> list[str]:
        """The paths among ``named`` inside the repository, relative to it (an agent
        that names its files itself, as ACP's ``locations`` do, gives absolute ones)."""
        files = []
        for value in named[:100]:
            if isinstance(value, str) and value and "\0" not in value:
                path = os.path.normpath(os.path.join(self.root, value))
                relative = os.path.relpath(path, self.root)
                if relative != "." and relative != ".." and not relative.startswith(".." + os.sep):
                    files.append(relative.replace(os.sep, "/"))
        return files
