"""The dashboard in a real browser (the full headless Chromium, not the tests' headless
shell: what a person's browser does): the page's first load (login
link to a drawn dashboard, and the browser's own load event), and the delay from an
agent printing a line to that line appearing in the Battle view (agent → daemon →
iteration_output → WebSocket → DOM, coalescing window included)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pokeralph_core.weblink import info_path, login_query, token_path
from tests.bench.common import Table, median, pct, start_daemon
from tests.helpers import make_git_repo, wait_until
from tests.web.browser import Browser, missing

#: A plain-text agent (the command backend): each line carries the time it was printed.
AGENT = """import sys, time
sys.stdin.read()
for i in range({lines}):
    print(f"STAMP {{time.time()!r}} {{i}}", flush=True)
    time.sleep(0.02)
"""
WATCH = """
window.__delays = [];
const seen = new Set();
new MutationObserver(() => {
  const now = (performance.timeOrigin + performance.now()) / 1000;
  for (const span of document.querySelectorAll('#output span')) {
    const m = span.textContent.match(/^STAMP (\\S+) (\\d+)/);
    if (m && !seen.has(m[2])) { seen.add(m[2]); window.__delays.push(now - Number(m[1])); }
  }
}).observe(document.getElementById('output'), {childList: true});
"""


def run(table: Table, loads: int = 5, lines: int = 200) -> None:
    why = missing(full=True)
    if why is not None:
        print(f"  skipped: {why}")
        return
    daemon = start_daemon()
    browser = Browser(full=True)
    try:
        socket = str(daemon.socket)
        wait_until(lambda: Path(info_path(socket)).exists(), what="the dashboard's address")
        info = json.loads(Path(info_path(socket)).read_text())
        url, instance = info["url"], info["instance"]
        secret = Path(token_path(socket)).read_bytes().strip()
        repo = make_git_repo(daemon.home / "repo")
        daemon.call("repo.register", {"path": str(repo)})
        agent = daemon.home / "agent.py"
        agent.write_text(AGENT.format(lines=lines))
        patch = {"mode": "yolo", "feedbackLoops": ["none"], "autoCommit": False}
        patch["agent"] = {
            "backend": "command",
            "command": sys.executable,
            "extraArgs": [str(agent)],
        }
        daemon.call("config.update", {"repo": str(repo), "patch": patch})
        task = daemon.call(
            "task.create",
            {
                "repo": str(repo),
                "title": "Latency",
                "description": "d",
                "acceptanceCriteria": ["c"],
            },
        )["task"]["id"]

        drawn, loaded = [], []
        ready = "return document.getElementById('view').dataset.ready === '1'"
        for _ in range(loads):
            browser.driver.delete_all_cookies()
            t0 = time.perf_counter()
            browser.driver.get(f"{url}login?{login_query(secret, instance)}")
            wait_until(lambda: browser.js(ready), what="the dashboard")
            drawn.append(time.perf_counter() - t0)
            loaded.append(
                browser.js(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "return (n.loadEventEnd - n.startTime) / 1000"
                )
            )
        table.add(
            "dashboard first load: link → drawn (median)",
            f"{median(drawn) * 1000:.0f} ms",
            f"{loads} loads, no cache; load event {median(loaded) * 1000:.0f} ms",
        )

        browser.driver.get(f"{url}#/battle/repo/{task}")
        browser.driver.refresh()
        wait_until(lambda: browser.js(ready), what="the battle view")
        browser.js(WATCH)
        daemon.call("battle.start", {"repo": str(repo), "taskId": task, "maxIterations": 1})
        delays: list[float] = wait_until(
            lambda: (d := browser.js("return window.__delays")) and len(d) >= lines and d,
            timeout=120,
            what="every line in the browser",
        )
        table.add(
            "agent line → shown in the browser p50 / p99",
            f"{pct(delays, 50) * 1000:.1f} / {pct(delays, 99) * 1000:.1f} ms",
            f"{len(delays)} lines, 20 ms apart",
        )
    finally:
        browser.close()
        daemon.stop()


if __name__ == "__main__":
    run(Table())
