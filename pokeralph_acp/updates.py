"""A battle's events as ACP ``session/update``s: what the editor's agent panel shows.

- ``iteration_output`` chunks: ``text`` → ``agent_message_chunk``; ``tool_use`` ("Name:
  summary") → a new ``tool_call`` (in progress), its ``tool_result`` / ``tool_error`` →
  ``tool_call_update`` (completed / failed) of the latest open one; ``notice`` → a
  message line; ``stderr`` and a verifier's or reviewer's text → ``agent_thought_chunk``.
- ``iteration_start`` / ``iteration_end`` / ``phase_changed`` → a ``plan``: one entry per
  iteration and per verification or review cycle, sent whole each time (ACP replaces the
  plan on every update), at most :data:`MAX_PLAN` entries (the oldest go first).
- The end of the battle, a pause, a block, an escalation → a message line.

Pure: :class:`Translator` turns one event into a list of updates; the caller sends them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PLAN = 50
#: The longest text put into one update (the daemon already caps a chunk's text).
MAX_TEXT = 64_000
TOOL_KINDS = {
    "bash": "execute",
    "read": "read",
    "edit": "edit",
    "multiedit": "edit",
    "write": "edit",
    "notebookedit": "edit",
    "grep": "search",
    "glob": "search",
    "ls": "search",
    "webfetch": "fetch",
    "websearch": "fetch",
    "task": "think",
    "todowrite": "think",
}
PHASE_TITLES = {"verification": "Verification", "review": "Review"}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "\n[… cut]"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": _cut(text)}


def message(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": text_block(text)}


def thought(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_thought_chunk", "content": text_block(text)}


def tool_kind(name: str) -> str:
    return TOOL_KINDS.get(name.strip().split(" ")[0].lower(), "other")


class Translator:
    """One turn's view of its battle: the open tool call and the plan so far."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix  # tool call ids are unique within the session
        self._calls = 0
        self._open: str | None = None
        self._plan: list[dict[str, str]] = []

    def tool_call_id(self) -> str:
        self._calls += 1
        return f"{self._prefix}-{self._calls}"

    def event(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        payload = event.get("payload") or {}
        if kind == "iteration_output":
            return self.output(payload)
        if kind == "iteration_start":
            self._finish_running()
            n = payload.get("iteration")
            top = payload.get("maxIterations")
            self._add(f"Iteration {n}" + (f" of {top}" if top else ""))
            return [self._plan_update(), message(f"\n\n**Iteration {n}**\n\n")]
        if kind == "iteration_end":
            result = payload.get("result") or "done"
            error = payload.get("error")
            self._finish_running(f" — {result}" + (f": {error}" if error else ""))
            return [self._plan_update()]
        if kind == "phase_changed":
            phase = payload.get("phase")
            self._finish_running()
            if phase in PHASE_TITLES:
                cycle = payload.get("cycle")
                self._add(PHASE_TITLES[phase] + (f" (cycle {cycle})" if cycle else ""))
            reason = payload.get("reason")
            line = f"\n\n*Phase: {phase}*" + (f" — {reason}" if reason else "") + "\n\n"
            return [self._plan_update(), message(line)]
        if kind in ("battle_complete", "battle_failed", "battle_cancelled"):
            self._finish_running()
            return [self._plan_update()]
        return []

    # -- output
    def output(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        side = payload.get("phase")  # a verifier's or reviewer's run
        updates: list[dict[str, Any]] = []
        for chunk in payload.get("chunks") or []:
            if not isinstance(chunk, dict):
                continue
            text = str(chunk.get("text") or "")
            kind = chunk.get("kind")
            if kind == "tool_use":
                updates += self._close_open("completed")
                self._open = self.tool_call_id()
                title = text.splitlines()[0][:200] if text else "tool"
                if side:
                    title = f"{side}: {title}"
                updates.append(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": self._open,
                        "title": title,
                        "kind": tool_kind(text.split(":", 1)[0]),
                        "status": "in_progress",
                        "rawInput": {"summary": _cut(text)},
                    }
                )
            elif kind in ("tool_result", "tool_error"):
                status = "failed" if kind == "tool_error" else "completed"
                updates += self._close_open(status, text)
            elif kind == "text" and not side:
                updates.append(message(text + "\n\n"))  # a chunk is a block of its own
            elif kind == "notice":
                updates.append(message(f"\n\n> {text}\n\n"))
            else:  # stderr, and what a verifier or reviewer says
                updates.append(thought(f"[{side}] {text}" if side else text))
        return updates

    def _close_open(self, status: str, text: str | None = None) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": self._open,
            "status": status,
        }
        if text:
            update["content"] = [{"type": "content", "content": text_block(text)}]
        self._open = None
        return [update]

    def close(self) -> list[dict[str, Any]]:
        """Updates that close what is still open (a tool call cut short by the end)."""
        return self._close_open("completed")

    # -- plan
    def _add(self, content: str) -> None:
        self._plan.append({"content": content, "priority": "medium", "status": "in_progress"})
        del self._plan[:-MAX_PLAN]

    def _finish_running(self, suffix: str = "") -> None:
        for entry in self._plan:
            if entry["status"] == "in_progress":
                entry["status"] = "completed"
                entry["content"] += suffix

    def _plan_update(self) -> dict[str, Any]:
        return {"sessionUpdate": "plan", "entries": [dict(e) for e in self._plan]}
