"""The ten tools of seed 001 as the model sees them: name, description, JSON Schema of
the arguments and risk level, and the checking of a call's arguments against that schema
(types, required keys, no unknown keys), with an error the model can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Risk = Literal["read_only", "safe_write", "dangerous"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    risk: Risk
    # whether a call is asked for at all: terminal_last_command only repeats what an
    # approved command already printed, so there is nothing to approve
    asks: bool = True

    def schema(self) -> dict[str, Any]:
        """The ``tools`` entry both APIs take (``{"type": "function", "function": …}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _i(description: str, minimum: int = 1) -> dict[str, Any]:
    return {"type": "integer", "description": description, "minimum": minimum}


def _b(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


PATH = "A path relative to the working directory (or absolute, inside it)"

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "create_file",
        "Create a new file with the given content (parent directories are created). "
        "Refuses to replace an existing file unless overwrite is true; to change part "
        "of a file use replace_string_in_file.",
        _obj(
            ["path", "content"],
            path=_s(PATH),
            content=_s("The whole content of the file"),
            overwrite=_b("Replace the file if it exists (default false)"),
        ),
        "safe_write",
    ),
    ToolSpec(
        "read_file",
        "Read a text file, optionally only lines start_line..end_line (1-based, "
        "inclusive). Long output is cut at 10 KB: read further with a line range.",
        _obj(
            ["path"],
            path=_s(PATH),
            start_line=_i("First line to read (1-based)"),
            end_line=_i("Last line to read (inclusive)"),
        ),
        "read_only",
    ),
    ToolSpec(
        "replace_string_in_file",
        "Replace one exact occurrence of old_string in a file with new_string. "
        "old_string must occur exactly once: include enough surrounding lines to make "
        "it unique, with the exact whitespace.",
        _obj(
            ["path", "old_string", "new_string"],
            path=_s(PATH),
            old_string=_s("The exact text to replace (must occur exactly once)"),
            new_string=_s("The text to put in its place"),
        ),
        "dangerous",
    ),
    ToolSpec(
        "list_dir",
        "List a directory's entries (directories end with /).",
        _obj([], path=_s(PATH + "; default: the working directory")),
        "read_only",
    ),
    ToolSpec(
        "file_search",
        "Find files whose path matches a glob pattern, e.g. **/*.py or src/**/test_*.py "
        "(relative to the working directory; .git is skipped).",
        _obj(["pattern"], pattern=_s("A glob pattern (* ? [..] and ** for any depth)")),
        "read_only",
    ),
    ToolSpec(
        "grep_search",
        "Search file contents for a text (or a regular expression with is_regex), "
        "optionally only in files matching include_pattern or under path. Prints "
        "path:line: text for each match.",
        _obj(
            ["query"],
            query=_s("The text (or regular expression) to find"),
            is_regex=_b("Treat query as a Python regular expression (default false)"),
            include_pattern=_s("Only files whose path matches this glob, e.g. **/*.py"),
            path=_s("Only under this directory"),
        ),
        "read_only",
    ),
    ToolSpec(
        "run_in_terminal",
        "Run a shell command in the working directory (sh -c) and get its exit status "
        "and output (stdout and stderr together, cut at 10 KB keeping the start and the "
        "end). It runs without a terminal or input and is stopped after timeout_seconds.",
        _obj(
            ["command"],
            command=_s("The shell command"),
            timeout_seconds=_i("Stop it after this many seconds (default 120, at most 600)"),
        ),
        "dangerous",
    ),
    ToolSpec(
        "terminal_last_command",
        "Show the last command run with run_in_terminal, its exit status and its output.",
        _obj([]),
        "read_only",
        asks=False,
    ),
    ToolSpec(
        "create_directory",
        "Create a directory and any missing parents.",
        _obj(["path"], path=_s(PATH)),
        "safe_write",
    ),
    ToolSpec(
        "fetch_webpage",
        "Fetch a web page (http or https) and get its text.",
        _obj(["url"], url=_s("The URL")),
        "dangerous",
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}
READ_ONLY = frozenset(t.name for t in TOOLS if t.risk == "read_only")

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "boolean": (bool,)}


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The arguments as a dict if they satisfy the schema, else :class:`ValueError` with
    a message naming the argument and what it should be."""
    if not isinstance(arguments, dict):
        raise ValueError(
            f"the arguments of {spec.name} must be a JSON object, got {type(arguments).__name__}"
        )
    props: dict[str, Any] = spec.parameters["properties"]
    for key in spec.parameters["required"]:
        if key not in arguments or arguments[key] is None:
            raise ValueError(f"{spec.name} needs the argument {key!r}")
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if key not in props:
            known = ", ".join(props) or "none"
            raise ValueError(f"{spec.name} has no argument {key!r} (its arguments: {known})")
        if value is None:
            continue  # an optional argument given as null: as if absent
        kind = props[key]["type"]
        ok = isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))
        if not ok:
            raise ValueError(
                f"{spec.name}: argument {key!r} must be a {kind}, got {type(value).__name__} "
                f"{str(value)[:80]!r}"
            )
        if kind == "integer" and value < props[key].get("minimum", value):
            raise ValueError(
                f"{spec.name}: argument {key!r} must be at least {props[key]['minimum']}"
            )
        out[key] = value
    return out
