"""Sessions (seed 001's Session, Message, ToolCall, ToolResult) and where they are kept.

A session is one versioned JSON document (``schemaVersion``, ``version``; atomic writes,
see :mod:`pokeralph_core.documents`), named ``{id}.json``. Field names are the seed's
own (snake_case), as its storage schema shows them; fields marked "ours" extend it.

**Bounded.** A session keeps at most ``context_messages`` messages (the seed's 10-1000,
default 100) and as many tool results; older ones are never dropped silently: they are
appended to ``{id}.archive.jsonl`` beside it (one JSON object a line, ``kind`` naming it)
and counted in ``archived_messages``/``archived_tool_results``. The first user message
(the task) and the system prompt stay, and a cut never separates an assistant's tool
calls from their results (an API refuses such a conversation).

**Where.** In a battle, under the battle's folder
(``.pokeralph/battles/{taskId}/sessions/``, given by the backend); on its own, under the
user's state folder, one folder per working directory
(``{state}/localagent/sessions/{hash of the directory}/``); a ``latest`` file there names
the session written last, the one ``--continue`` takes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pokeralph_agent.errors import SessionError
from pokeralph_core import documents
from pokeralph_core.atomic import append_bytes, atomic_write
from pokeralph_core.documents import DocumentKind
from pokeralph_core.errors import CorruptFile
from pokeralph_core.timeutil import Timestamp, utcnow

if TYPE_CHECKING:
    from pathlib import Path

SessionStatus = Literal["active", "paused", "completed", "errored"]
CallStatus = Literal["pending", "approved", "rejected", "executed", "failed"]
# seed: manual (a person), auto (no rule needed: a read-only tool in plan mode, or a
# tool that asks nothing), config_rule; ours: host (the daemon decided: a rule or a
# person through the inbox), policy (--yes, or no one could be asked)
ApprovalMethod = Literal["manual", "auto", "config_rule", "host", "policy"]


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ToolCall(Doc):
    id: str = Field(min_length=1, max_length=200)
    tool_name: str = Field(max_length=200)
    parameters: Any = Field(default_factory=dict)
    status: CallStatus = "pending"
    approval_method: ApprovalMethod | None = None
    approval_rule_id: str | None = None
    requested_at: Timestamp = Field(default_factory=utcnow)
    executed_at: Timestamp | None = None


class Message(Doc):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = ""
    timestamp: Timestamp = Field(default_factory=utcnow)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _seed_rules(self) -> Message:
        if self.role == "user" and self.tool_calls:
            raise ValueError("a user message has no tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message must reference a tool_call_id")
        if not self.content and not self.tool_calls and self.role != "tool":
            raise ValueError(f"a {self.role} message needs content or tool_calls")
        return self


class ToolResult(Doc):
    tool_call_id: str
    success: bool
    output: str = ""
    error: str | None = None
    execution_time_ms: int = Field(default=0, ge=0)
    files_affected: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _error_iff_failed(self) -> ToolResult:
        if self.success and self.error:
            raise ValueError("a successful result has no error")
        if not self.success and not self.error:
            raise ValueError("a failed result says its error")
        for path in self.files_affected:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(
                    f"files_affected holds paths inside the working directory, got {path!r}"
                )
        return self


class TokenUsage(Doc):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class Session(Doc):
    id: str = Field(default_factory=lambda: str(uuid.uuid4()), pattern=r"^[A-Za-z0-9_-]{1,64}$")
    working_dir: str
    model: str = Field(min_length=1)
    created_at: Timestamp = Field(default_factory=utcnow)
    updated_at: Timestamp = Field(default_factory=utcnow)
    status: SessionStatus = "active"
    messages: list[Message] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    # ours
    api: Literal["ollama", "openai"] = "ollama"
    base_url: str = ""
    turns: int = Field(default=0, ge=0)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    stop_reason: str | None = None
    error: str | None = None
    archived_messages: int = Field(default=0, ge=0)
    archived_tool_results: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _absolute(self) -> Session:
        if not os.path.isabs(self.working_dir):
            raise ValueError("working_dir must be an absolute path")
        return self

    def touch(self) -> None:
        self.updated_at = utcnow()


SESSION_KIND = DocumentKind("localagent-session", Session)
LATEST = "latest"  # the id of the session written last


def trim(session: Session, keep: int) -> tuple[list[Message], list[ToolResult]]:
    """Cut the session down to ``keep`` messages and ``keep`` tool results; what was cut.

    Pinned: leading system messages and the first user message. The cut ends before a
    user or assistant message, so no tool message is left without its call."""
    messages = session.messages
    cut_results: list[ToolResult] = []
    if len(session.tool_results) > keep:
        cut_results = session.tool_results[: len(session.tool_results) - keep]
        session.tool_results = session.tool_results[len(cut_results) :]
    if len(messages) <= keep:
        return [], cut_results
    pinned = 0
    while pinned < len(messages) and messages[pinned].role == "system":
        pinned += 1
    if pinned < len(messages) and messages[pinned].role == "user":
        pinned += 1
    start = max(pinned, len(messages) - (keep - pinned))
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    cut = messages[pinned:start]
    session.messages = messages[:pinned] + messages[start:]
    return cut, cut_results


class SessionStore:
    """The sessions of one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._latest: str | None = None

    @classmethod
    def for_directory(cls, state_dir: Path, working_dir: Path) -> SessionStore:
        digest = hashlib.sha256(os.fsencode(str(working_dir))).hexdigest()[:16]
        return cls(state_dir / "localagent" / "sessions" / digest)

    def path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.json"

    def archive_path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.archive.jsonl"

    def save(self, session: Session) -> None:
        """Write the session, and name it the folder's latest (what ``--continue`` takes)."""
        session.touch()
        documents.save(SESSION_KIND, self.path(session.id), session)
        if self._latest != session.id:
            atomic_write(self.folder / LATEST, session.id.encode() + b"\n")
            self._latest = session.id

    def archive(self, session: Session, messages: list[Message], results: list[ToolResult]) -> None:
        """Append what :func:`trim` cut to the archive, then count it."""
        if not messages and not results:
            return
        lines = [
            json.dumps({"kind": "message", **m.model_dump(mode="json")}, ensure_ascii=False)
            for m in messages
        ] + [
            json.dumps({"kind": "tool_result", **r.model_dump(mode="json")}, ensure_ascii=False)
            for r in results
        ]
        append_bytes(self.archive_path(session.id), ("\n".join(lines) + "\n").encode())
        session.archived_messages += len(messages)
        session.archived_tool_results += len(results)

    def load(self, session_id: str) -> Session:
        try:
            loaded = documents.load(SESSION_KIND, self.path(session_id))
        except CorruptFile as exc:
            raise SessionError(f"session {session_id} cannot be read: {exc.message}") from None
        if loaded is None:
            raise SessionError(f"no session {session_id} in {self.folder}")
        return loaded.value

    def latest(self) -> Session | None:
        """The session written last in this folder, if any."""
        try:
            session_id = (self.folder / LATEST).read_text().strip()
        except FileNotFoundError:
            return None
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
            raise SessionError(f"{self.folder / LATEST} does not name a session")
        return self.load(session_id)
