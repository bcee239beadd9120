"""pokeralph's DEMO agent (not a real coding agent): finishes the bundled sample task.

Speaks Claude Code's ``stream-json`` on stdout. It looks at the repository, not at a
counter: while ``word_count`` is a stub it implements that and stops (the tests still
fail, no completion claimed); once it exists it implements ``top_words`` and claims
completion with the sigil and a completion block carrying evidence per criterion.

As the verifier (seed 003's QA agent) it runs the sample's tests and reports on each
acceptance criterion from what they say; as the reviewer it approves with a suggestion.

It pauses ``--pace`` seconds after each event it writes (default 0.05) so that a person
can watch it; ``--pace 0`` runs it at full speed (``pokeralphctl demo --pace 0``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

SESSION = str(uuid.uuid4())
#: seconds between events unless ``--pace`` says otherwise: slow enough to read along
DEFAULT_PACE = 0.05
#: the longest ``--pace`` accepted (a demo, not a wait)
MAX_PACE = 5.0
pace = DEFAULT_PACE
WORD_COUNT = '''def word_count(text: str) -> int:
    """How many words ``text`` holds (runs of letters, digits and apostrophes)."""
    return len(re.findall(r"[\\w']+", text))
'''
TOP_WORDS = '''def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` most frequent words, lowercased, most frequent first (ties: alphabetical)."""
    counts: dict[str, int] = {}
    for word in re.findall(r"[\\w']+", text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
'''


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
    if pace:
        time.sleep(pace)  # a demo should be watchable


def say(text: str) -> None:
    emit(
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "session_id": SESSION,
        }
    )


def tool(name: str, tool_input: dict[str, Any], result: str) -> None:
    tool_id = f"toolu_{uuid.uuid4().hex[:12]}"
    emit(
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
            },
            "session_id": SESSION,
        }
    )
    emit(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": result,
                        "is_error": False,
                    }
                ],
            },
            "session_id": SESSION,
        }
    )


def replace_function(source: str, name: str, body: str) -> str:
    pattern = re.compile(rf"def {name}\(.*?(?=\ndef |\Z)", re.DOTALL)
    return pattern.sub(lambda _m: body.rstrip("\n") + "\n", source, count=1)


def finish(final: str, cost: float = 0.0) -> None:
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 300,
            "duration_api_ms": 0,
            "num_turns": 2,
            "result": final,
            "session_id": SESSION,
            "total_cost_usd": cost,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    )


def criteria_of(prompt: str) -> list[str]:
    block = prompt.split("### Acceptance criteria", 1)[-1].strip().split("\n\n", 1)[0]
    found = (re.match(r"(\d+)\. (.*)", line) for line in block.splitlines())
    return [m.group(2) for m in found if m]


def verify(prompt: str) -> None:
    """Run the tests and judge each criterion by them (a demo's QA, not a real one)."""
    say("[pokeralph demo agent] Verifying: running the tests myself.")
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], capture_output=True, text=True, timeout=120
    )
    output = (run.stdout + run.stderr).strip()
    tool("Bash", {"command": "python3 -m unittest -q"}, output[-2000:])
    passed = run.returncode == 0
    ran = re.search(r"Ran (\d+) test", output)
    total = int(ran.group(1)) if ran else 0
    items = [
        {
            "id": number,
            "criterion": criterion,
            "status": "passed" if passed else "failed",
            "evidence": "python3 -m unittest -q: OK" if passed else output[-300:],
        }
        for number, criterion in enumerate(criteria_of(prompt), 1)
    ]
    report = {
        "testResults": {
            "summary": {
                "passed": total if passed else 0,
                "failed": 0 if passed else 1,
                "total": total,
            },
            "commands": [
                {"command": "python3 -m unittest -q", "passed": passed, "exitCode": run.returncode}
            ],
        },
        "acceptanceCriteria": items,
        "recommendation": "approve" if passed else "request_changes",
        "feedback": {
            "summary": "the tests pass and cover each criterion" if passed else "the tests fail",
            "items": []
            if passed
            else [{"severity": "critical", "description": "the unit tests fail"}],
        },
    }
    final = "<verification-report>" + json.dumps(report) + "</verification-report>"
    say(final)
    finish(final)


def review() -> None:
    say("[pokeralph demo agent] Reviewing the change.")
    report = {
        "assessment": "comment",
        "comments": [
            {
                "id": "R001",
                "severity": "minor",
                "blocking": False,
                "file": "textstats.py",
                "issue": "the word pattern is written twice",
                "suggestion": "keep it in one module-level constant",
                "category": "maintainability",
            }
        ],
        "feedback": {"blockingCount": 0, "suggestionCount": 1, "message": "fine to merge"},
    }
    final = "<review-report>" + json.dumps(report) + "</review-report>"
    say(final)
    finish(final)


def parse_pace(argv: list[str]) -> float:
    """The ``--pace`` of the command line, within [0, MAX_PACE]."""

    def seconds(text: str) -> float:
        value = float(text)
        if not 0 <= value <= MAX_PACE:
            raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_PACE:g}")
        return value

    parser = argparse.ArgumentParser(prog="pokeralphd.agents.demo_agent")
    parser.add_argument("--pace", type=seconds, default=DEFAULT_PACE, metavar="SECONDS")
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # agent.extraArgs meant for another backend: the demo goes on without them
        print(f"demo agent: ignoring {' '.join(unknown)}", file=sys.stderr)
    return float(args.pace)


def main(argv: list[str] | None = None) -> int:
    global pace
    pace = parse_pace(sys.argv[1:] if argv is None else argv)
    prompt = sys.stdin.read()
    if prompt.startswith(("Role: verifier", "Role: reviewer")):
        emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": str(Path.cwd()),
                "session_id": SESSION,
                "model": "pokeralph-demo",
                "tools": ["Read", "Bash"],
                "permissionMode": "acceptEdits",
            }
        )
        if prompt.startswith("Role: verifier"):
            verify(prompt)
        else:
            review()
        return 0
    task = re.search(r"Task ID: (\S+)", prompt)
    task_id = task.group(1) if task else "unknown"
    emit(
        {
            "type": "system",
            "subtype": "init",
            "cwd": str(Path.cwd()),
            "session_id": SESSION,
            "model": "pokeralph-demo",
            "tools": ["Read", "Edit"],
            "permissionMode": "acceptEdits",
        }
    )
    say("[pokeralph demo agent] I am a scripted demo, not a real coding agent. Reading the task.")
    module = Path("textstats.py")
    if not module.exists():
        say("This is not the pokeralph sample repository; the demo agent can only work there.")
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": "demo agent: not the sample repository",
                "session_id": SESSION,
                "total_cost_usd": 0,
                "num_turns": 1,
                "duration_ms": 1,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        )
        return 1
    source = module.read_text()
    tool("Read", {"file_path": str(module.resolve())}, source)
    if "import re" not in source:
        source = source.replace('"""\n', '"""\n\nimport re\n', 1)
    if "raise NotImplementedError" in source.split("def top_words")[0]:
        say("word_count is a stub. Implementing it first; top_words comes next iteration.")
        module.write_text(replace_function(source, "word_count", WORD_COUNT))
        tool(
            "Edit",
            {
                "file_path": str(module.resolve()),
                "old_string": "raise NotImplementedError",
                "new_string": "return len(...)",
            },
            "The file textstats.py has been updated.",
        )
        final = (
            "Implemented word_count. top_words is still a stub, so the task is not complete yet."
        )
        say(final)
    else:
        say("word_count is done. Implementing top_words.")
        module.write_text(replace_function(source, "top_words", TOP_WORDS))
        tool(
            "Edit",
            {
                "file_path": str(module.resolve()),
                "old_string": "raise NotImplementedError",
                "new_string": "return sorted(...)",
            },
            "The file textstats.py has been updated.",
        )
        block = {
            "type": "BATTLE_COMPLETE",
            "version": 1,
            "taskId": task_id,
            "summary": "Implemented word_count and top_words in textstats.py.",
            "acceptanceCriteriaMet": [
                {
                    "criterion": "word_count counts words",
                    "met": True,
                    "evidence": "word_count uses a word regex; test_word_count covers it",
                },
                {
                    "criterion": "top_words returns the n most frequent words",
                    "met": True,
                    "evidence": "sorted by count then word; test_top_words covers ties",
                },
                {
                    "criterion": "the unit tests pass",
                    "met": True,
                    "evidence": "python -m unittest passes locally",
                },
            ],
            "filesChanged": ["textstats.py"],
            "testsAdded": [],
            "confidence": 0.9,
            "notes": "demo agent",
        }
        final = (
            "Both functions are implemented.\n<promise>COMPLETE</promise>\n<completion>"
            + json.dumps(block)
            + "</completion>"
        )
        say(final)
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 300,
            "duration_api_ms": 0,
            "num_turns": 3,
            "result": final,
            "session_id": SESSION,
            "total_cost_usd": 0.0,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
