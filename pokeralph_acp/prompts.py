"""What an editor's prompt says: its text (:func:`prompt_text`, from ACP content blocks)
and, read as a task (:func:`task_of`), a title, a description and acceptance criteria."""

from __future__ import annotations

import re
from typing import Any

from pokeralph_acp.wire import INVALID_PARAMS, RpcError

MAX_CRITERIA = 50
PREFIX = re.compile(r"^\s*(?:add a task|new task|task)\s*:\s*", re.I)
BULLET = re.compile(r"^\s*(?:[-*•]|[0-9]{1,3}[.)])\s+(\S.*)$")


def prompt_text(blocks: Any) -> str:
    """The text of a prompt's content blocks: text, links, and embedded text resources."""
    if not isinstance(blocks, list):
        raise RpcError(
            INVALID_PARAMS, "prompt must be a list of content blocks", {"field": "prompt"}
        )
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            raise RpcError(INVALID_PARAMS, "a content block must be an object", {"field": "prompt"})
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            parts.append(f"(see {block['uri']})")
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            if isinstance(resource.get("text"), str):
                parts.append(f"\n{resource.get('uri', 'context')}:\n```\n{resource['text']}\n```")
    return "\n".join(parts)


def task_of(text: str) -> tuple[str, str, list[str]]:
    """A prompt as a task: its title, description and acceptance criteria."""
    text = PREFIX.sub("", text, count=1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0].lstrip("#").strip() if lines else text
    bullet = BULLET.match(first)
    title = (bullet.group(1) if bullet else first) or "A request from the editor"
    if len(title) > 200:
        title = title[:199].rsplit(" ", 1)[0][:199] + "…"
    criteria = [m.group(1).strip() for line in lines[1:] if (m := BULLET.match(line))]
    if not criteria:
        criteria = [f"Done as asked: {title}"]
    return title, text, criteria[:MAX_CRITERIA]
