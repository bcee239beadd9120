"""The system prompt a session starts with."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pokeralph_agent.toolspec import ToolSpec


def system_prompt(working_dir: str, tools: Sequence[ToolSpec], plan: bool) -> str:
    names = ", ".join(tool.name for tool in tools)
    lines = [
        "You are a coding agent working in a software project on the user's machine.",
        f"The working directory is {working_dir}. Every path you use must be inside it; "
        "prefer paths relative to it.",
        f"Act with your tools ({names}): read before you change, make the smallest "
        "change that works, and run the project's tests or checks with run_in_terminal "
        "when you changed code.",
        "Call tools through the tool-calling interface, not by writing JSON in your "
        "answer. When a tool reports an error, read it and correct the call.",
        "When the work is done, answer without a tool call: say what you did and what you checked.",
    ]
    if plan:
        lines.insert(2, "This is a planning session: you can only read, not change anything.")
    return "\n".join(lines)
