#!/usr/bin/env python3
"""A benchmark agent speaking Claude Code's stream-json: ``instant`` answers at once;
``stamped N`` prints N assistant lines, each carrying the time it was printed."""

import json
import sys
import time

mode = next((a for a in sys.argv[1:] if not a.startswith("-")), "instant")
# With permissions routed, the prompt is one stream-json line and stdin stays open for
# our answers (as Claude Code does): read that line, not to the end.
argv = sys.argv[1:]
streaming = "--input-format" in argv and argv[argv.index("--input-format") + 1 :][:1] == [
    "stream-json"
]
if streaming:
    sys.stdin.readline()
else:
    sys.stdin.read()


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


emit(
    {
        "type": "system",
        "subtype": "init",
        "session_id": "bench",
        "model": "bench",
        "tools": [],
        "cwd": ".",
    }
)
if mode.startswith("stamped"):
    count = int(mode.split(":")[1]) if ":" in mode else 50
    for i in range(count):
        emit(
            {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": f"STAMP {time.time()!r} {i}"}]},
                "session_id": "bench",
            }
        )
        time.sleep(0.02)
emit(
    {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "done"}]},
        "session_id": "bench",
    }
)
emit(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "done",
        "session_id": "bench",
        "total_cost_usd": 0,
        "num_turns": 1,
        "duration_ms": 1,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
)
