#!/usr/bin/env python3
"""A benchmark agent for the command backend: prints RATE plain-text lines a second for
SECONDS, then the completion sigil.

Usage: ``flood_agent.py OUT RATE SECONDS [TICK_MS]``. Each line is ``STAMP DUE WROTE TAG
N``: when the line was due on the schedule and when it was written (``time.time_ns()``,
comparable across processes), its battle (``repo/taskId``) and its number. Lines are
written once a tick (every TICK_MS, 10 ms by default), all that are due in one write; an
agent held back (a full pipe, a busy machine) catches up in a burst, so ``WROTE - DUE``
shows how long it was held. What it printed goes to ``OUT/<repo>-<taskId>.json``.
"""

import json
import os
import sys
import time

out, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
TICK_NS = int(float(sys.argv[4]) * 1_000_000) if len(sys.argv) > 4 else 10_000_000
sys.stdin.read()
repo, task = os.environ["POKERALPH_REPO"], os.environ["POKERALPH_TASK_ID"]
tag = f"{repo}/{task}"
total = int(rate * seconds)
step = 1e9 / rate
write = sys.stdout.buffer.write
flush = sys.stdout.buffer.flush
start = time.time_ns()
printed = 0
while printed < total:
    now = time.time_ns()
    due = min(total, int((now - start) / step) + 1)
    if due > printed:
        write(
            "".join(
                f"STAMP {start + int(i * step)} {now} {tag} {i}\n" for i in range(printed, due)
            ).encode()
        )
        flush()
        printed = due
    time.sleep(max(0.0, (TICK_NS - (time.time_ns() - now)) / 1e9))
with open(os.path.join(out, f"{repo}-{task}.json"), "w") as f:
    json.dump({"tag": tag, "printed": printed, "seconds": (time.time_ns() - start) / 1e9}, f)
print("done <promise>COMPLETE</promise>", flush=True)
