"""Many battles streaming at once (issue 22): BATTLES battles across REPOS repositories,
each agent printing RATE lines a second for SECONDS (:mod:`tests.bench.flood_agent`),
with SUBSCRIBERS clients subscribed to every event, the dashboard's WebSocket subscribed
too, and another client pinging 20 times a second throughout.

Reports the delay from an agent writing a line to a subscriber receiving it (p50/p99;
from the line's write, and from when it was due, which adds the time an agent was held
back by a full pipe or a busy machine), the daemon's CPU per 1,000 lines, its resident
memory over the run, the event history's size, what was coalesced away or dropped and
where that was said, and the ping's p50/p99. Accounting: for every battle, at the
measuring receivers, the lines that arrived plus those announced as lost equal the lines
the agent printed; at the others the totals do.

Where loss is said: an ``iteration_output`` chunk ``[N chunks coalesced away; see the
log]`` (the battle's output backlog passed its bound between two flushes), and an
``events.overflow`` notice to a subscriber that fell too far behind (it is disconnected;
it resumes with ``since`` and the reply says how many events were ``lost``).

``python -m tests.bench.bench_stream --battles 5 --repos 1 --seconds 3`` for a small run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websocket

from pokeralph_core.weblink import info_path, token_path
from tests.bench.common import Table
from tests.helpers import SettingsDaemon, make_git_repo, short_tmpdir, wait_until

AGENT = Path(__file__).with_name("flood_agent.py")
MAX_CONCURRENT = 256  # DaemonSettings.max_concurrent_battles' upper bound
MAX_PER_REPO = 16  # Config.parallel_battles' upper bound
PING_HZ = 20
TAG = re.compile(rb"STAMP \d+ \d+ (\S+) ")  # every line: its battle
# a tenth of the lines (those whose number ends in 0): their delays, so that measuring
# does not make a receiver fall behind what it measures (per line in Python, a measuring
# receiver took ~0.3 of a core at 100,000 lines a second)
SAMPLE = re.compile(rb"STAMP (\d+) (\d+) \S+ (\d*0)(?!\d)")
SAMPLED = 10
COALESCED = re.compile(r"^\[(\d+) chunks coalesced away")
SEQ = re.compile(rb'"seq":(\d+)')
BUCKET_NS = 100_000  # delays are counted in 0.1 ms buckets
STEADY_AFTER = 5  # seconds after the last start left out of the figures while all stream
STEADY_BEFORE_END = 3  # and before the first end (battles ending: loops, commits, merges)
LATE_NS = 100_000_000  # the target: a line later than this is counted by when it was written
EVENT = b'"method":"event"'


@dataclass
class Tally:
    """What one receiver saw."""

    name: str
    measure: bool  # per-battle counts and delays (else totals only: cheaper)
    events: int = 0
    received: int = 0  # bytes
    lines: int = 0
    per_battle: Counter[bytes] = field(default_factory=Counter)
    coalesced: Counter[str] = field(default_factory=Counter)  # announced lost, by battle
    overflows: list[int] = field(default_factory=list)  # lastSeq of each events.overflow
    lost_events: int = 0  # from the resubscription's reply
    drops: int = 0  # connections closed under it without a notice it read (WebSocket)
    since_written: Counter[int] = field(default_factory=Counter)  # delay buckets (sampled)
    since_due: Counter[int] = field(default_factory=Counter)
    late: Counter[int] = field(default_factory=Counter)  # sampled >100 ms, by second written
    # since_written's buckets by the second (wall clock) the line was written, to read
    # the delays of a window of the run afterwards
    by_second: dict[int, Counter[int]] = field(default_factory=dict)
    last_seq: int = 0
    error: str = ""

    def take(self, block: bytes, now: int) -> None:
        """A run of whole lines received at ``now`` (ns)."""
        self.received += len(block)
        self.events += block.count(EVENT)
        at = block.rfind(b'"seq":')
        if at >= 0 and (m := SEQ.match(block, at)):
            self.last_seq = max(self.last_seq, int(m.group(1)))
        if self.measure:
            written, due = self.since_written, self.since_due
            self.per_battle.update(TAG.findall(block))  # counted in C
            by_second = self.by_second
            for m in SAMPLE.finditer(block):
                wrote = int(m.group(2))
                bucket = (now - wrote) // BUCKET_NS
                written[bucket] += 1
                second = wrote // 1_000_000_000
                if (counts := by_second.get(second)) is None:
                    counts = by_second[second] = Counter()
                counts[bucket] += 1
                due[(now - int(m.group(1))) // BUCKET_NS] += 1
                if now - wrote > LATE_NS:
                    self.late[wrote // 1_000_000_000] += SAMPLED
        else:
            self.lines += block.count(b"STAMP ")
        if b"coalesced away" in block or b"events.overflow" in block or b'"lost"' in block:
            for line in block.splitlines():
                self._special(line)

    def _special(self, line: bytes) -> None:
        if not line.strip():
            return
        message = json.loads(line)
        params = message.get("params") or {}
        if message.get("method") == "events.overflow":
            self.overflows.append(int(params["lastSeq"]))
        elif message.get("method") == "event" and params.get("type") == "iteration_output":
            tag = f"{params['repo']}/{params.get('taskId')}"
            for chunk in params["payload"]["chunks"]:
                if chunk["kind"] == "notice" and (m := COALESCED.match(chunk["text"])):
                    self.coalesced[tag] += int(m.group(1))
        elif isinstance(message.get("result"), dict):
            self.lost_events += int(message["result"].get("lost") or 0)

    @property
    def arrived(self) -> int:
        return sum(self.per_battle.values()) if self.measure else self.lines


# ---------------------------------------------------------------- the clients


def _subscribe(since: int | None) -> bytes:
    params = {} if since is None else {"since": since}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "events.subscribe", "params": params}
    ).encode()


def socket_receiver(path: str, tally: Tally, ready: Any, target: Any, stop: Any, out: Any) -> None:
    """A subscriber to every event on the Unix socket (in a process of its own), until
    it has seen the event ``target`` names (or ``stop``). After an overflow it resumes
    with ``since``, as a client should."""
    since: int | None = None
    try:
        while not stop.is_set():
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(path)
                sock.sendall(_subscribe(since) + b"\n")
                sock.settimeout(0.2)
                ready.set()
                buf = b""
                while not stop.is_set() and not (target.value and tally.last_seq >= target.value):
                    try:
                        data = sock.recv(1 << 20)
                    except TimeoutError:
                        continue
                    if not data:
                        break
                    buf += data
                    cut = buf.rfind(b"\n") + 1
                    if cut:
                        tally.take(buf[:cut], time.time_ns())
                        buf = buf[cut:]
                else:
                    break
                since = tally.overflows[-1] if tally.overflows else tally.last_seq
    except Exception as exc:
        tally.error = repr(exc)
    finally:
        ready.set()
        out.send(tally)


def ws_receiver(
    url: str, secret: str, tally: Tally, ready: Any, target: Any, stop: Any, out: Any
) -> None:
    """The dashboard's WebSocket, subscribed to every event as the page is. When the
    daemon closes it (an overflow, its notice maybe unread), it resumes with ``since``
    as the page does, and the reply says what was lost."""
    since: int | None = None
    try:
        port = url.split(":")[2].split("/")[0]
        while not stop.is_set():
            ws = websocket.create_connection(
                f"ws://127.0.0.1:{port}/ws",
                timeout=30,  # connecting to a daemon that waits for a CPU takes a while
                header=[f"Authorization: Bearer {secret}"],
                origin=url.rstrip("/"),
                # its own UTF-8 check is a per-byte loop in Python (without wsaccel): most
                # of this receiver's CPU; the text is still decoded strictly, in C
                skip_utf8_validation=True,
            )
            ws.send(_subscribe(since).decode())
            ws.settimeout(0.2)  # then short, to notice ``stop``
            ready.set()
            try:
                while not stop.is_set() and not (target.value and tally.last_seq >= target.value):
                    try:
                        message = ws.recv()
                    except websocket.WebSocketTimeoutException:
                        continue
                    data = message.encode() if isinstance(message, str) else message
                    tally.take(data + b"\n", time.time_ns())
                else:
                    ws.close()
                    break
            except websocket.WebSocketConnectionClosedException:
                tally.drops += 1
            since = tally.overflows[-1] if tally.overflows else tally.last_seq
    except Exception as exc:
        tally.error = repr(exc)
    finally:
        ready.set()
        out.send(tally)


def pinger(path: str, ready: Any, stop: Any, out: Any) -> None:
    """Another client: ``daemon.ping`` PING_HZ times a second, each round trip timed:
    ``(when it was sent, time.monotonic(); the round trip)``."""
    latencies: list[tuple[float, float]] = []
    error = ""
    request = b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n'
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            ready.set()
            tick = time.monotonic()
            while not stop.is_set():
                sent, t0 = time.monotonic(), time.perf_counter()
                sock.sendall(request)
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise ConnectionError("closed by the daemon")
                    buf += chunk
                latencies.append((sent, time.perf_counter() - t0))
                tick += 1 / PING_HZ
                time.sleep(max(0.0, tick - time.monotonic()))
    except Exception as exc:
        error = repr(exc)
    finally:
        ready.set()
        out.send((latencies, error))


class Sampler(threading.Thread):
    """The daemon's CPU time, resident memory and running agents, twice a second; and
    how long its event loop's thread waited for a CPU while it could run (the kernel's
    run-queue wait: what a busy machine adds to every delay)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.samples: list[tuple[float, float, int, int]] = []  # (t, cpu s, rss, agents)
        self.waited: list[float] = []  # run-queue wait (s) at each sample
        self.agent_cpu: dict[int, float] = {}  # each agent's CPU seconds, last seen
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                cpu = sum(self.proc.cpu_times()[:2])
                rss = self.proc.memory_info().rss
                agents = 0
                for child in self.proc.children(recursive=True):
                    if _is_agent(child):
                        agents += 1
                        with contextlib.suppress(psutil.Error):
                            self.agent_cpu[child.pid] = sum(child.cpu_times()[:2])
            except psutil.Error:
                return
            self.samples.append((time.monotonic(), cpu, rss, agents))
            self.waited.append(run_queue_wait(self.proc.pid))
            self.halt.wait(0.5)

    def second(self, t0: float, t0_wall: float, second: int) -> str:
        """What the daemon did in that second of the run (from ``int(t0_wall)``): its CPU
        and its loop's run-queue wait (ms), and the agents running at its end."""
        start = t0 + (int(t0_wall) + second - t0_wall)
        pairs = list(zip(self.samples, self.waited, strict=True))
        inside = [(s, w) for s, w in pairs if start <= s[0] <= start + 1.0]
        if len(inside) < 2:
            return f"{second} s: -"
        (a, wa), (b, wb) = inside[0], inside[-1]
        scale = 1000 / max(b[0] - a[0], 1e-9)
        return f"{second} s: {(b[1] - a[1]) * scale:.0f}/{(wb - wa) * scale:.0f}/{b[3]}"

    def at(self, t: float) -> tuple[float, float, int, int]:
        """The first sample at or after ``t`` (the last one if none)."""
        return next((s for s in self.samples if s[0] >= t), self.samples[-1])

    def children_cpu(self) -> float:
        """CPU seconds of the daemon's children it has reaped (agents, git, loops)."""
        try:
            times = self.proc.cpu_times()
        except psutil.Error:
            return math.nan
        return float(times.children_user + times.children_system)


def host_speed(seconds: float = 1.0) -> float:
    """Millions of iterations a second of a fixed pure-Python loop (the best of five
    slices of ``seconds``): how fast this host runs Python just now."""
    best = 0.0
    for _ in range(5):
        count, end = 0, time.perf_counter() + seconds / 5
        while time.perf_counter() < end:
            for _ in range(1000):
                count += 1
        best = max(best, count / (seconds / 5))
    return best / 1e6


def run_queue_wait(pid: int) -> float:
    """Seconds the process's main thread spent runnable but waiting for a CPU (Linux's
    /proc/PID/schedstat; NaN elsewhere)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return math.nan


def cpu_of(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` used so far (the clients)."""
    total = 0.0
    for pid in pids:
        try:
            total += sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def _is_agent(proc: psutil.Process) -> bool:
    """An agent itself: its interpreter running the script (not bubblewrap or the
    sandbox's bridge, whose command lines name the script too)."""
    try:
        cmdline = proc.cmdline()
    except psutil.Error:
        return False
    return len(cmdline) > 1 and cmdline[1].endswith("flood_agent.py")


# ---------------------------------------------------------------- the figures


def pcts(buckets: Counter[int], *ps: float) -> list[float]:
    """Percentiles (seconds) of delays counted in BUCKET_NS buckets."""
    total = sum(buckets.values())
    out = []
    for p in ps:
        rank, seen = math.ceil(p / 100 * total), 0
        for key in sorted(buckets):
            seen += buckets[key]
            if seen >= rank:
                out.append((key + 1) * BUCKET_NS / 1e9)
                break
        else:
            out.append(math.nan)
    return out


def merged(tallies: list[Tally], attr: str) -> Counter[int]:
    total: Counter[int] = Counter()
    for t in tallies:
        total.update(getattr(t, attr))
    return total


def ms2(pair: list[float]) -> str:
    return f"{pair[0] * 1000:.1f} / {pair[1] * 1000:.1f} ms"


# ---------------------------------------------------------------- the run


def run(
    table: Table,
    battles: int = 100,
    repos: int = 10,
    rate: float = 1000,
    seconds: float = 30,
    subscribers: int = 10,
    measure: int = 2,
    window: int | None = None,
    tick: int = 10,
    run_nice: int | None = None,
) -> None:
    per_repo = math.ceil(battles / repos)
    if per_repo > MAX_PER_REPO:
        raise SystemExit(
            f"{per_repo} battles per repository: parallelBattles allows {MAX_PER_REPO}"
        )
    at_once = min(battles, MAX_CONCURRENT)
    speed = host_speed()
    home = short_tmpdir("prst")
    out_dir = home / "printed"
    out_dir.mkdir()
    settings: dict[str, Any] = {"web": True, "maxConcurrentBattles": at_once}
    if run_nice is not None:
        settings["runNice"] = run_nice
    daemon = SettingsDaemon(home, settings)
    daemon.fork = False  # exec'd, as a user runs it (the fork server's pages are not its own)
    daemon.start()
    ctx = mp.get_context("fork")
    stop, target = ctx.Event(), ctx.Value("q", 0)
    procs: list[tuple[Any, Any]] = []
    try:
        socket_path = str(daemon.socket)
        wait_until(lambda: Path(info_path(socket_path)).exists(), 30, "the dashboard")
        url = json.loads(Path(info_path(socket_path)).read_text())["url"]
        secret = Path(token_path(socket_path)).read_bytes().strip().decode()
        # the agents write what they printed here: outside their working trees, so the
        # sandbox must be told (the user's layer, as a person would)
        sandbox = {"filesystem": {"readWrite": [str(out_dir)]}}
        daemon.call("config.updateUser", {"patch": {"sandbox": sandbox}})
        paths, tasks = [], 0
        for r in range(repos):
            count = min(per_repo, battles - tasks)
            if count <= 0:
                break
            repo = make_git_repo(home / f"r{r:02d}")
            paths.append(repo)
            daemon.call("repo.register", {"path": str(repo)})
            agent = {
                "backend": "command",
                "command": sys.executable,
                "extraArgs": [str(AGENT), str(out_dir), str(rate), str(seconds), str(tick)],
                "env": {},
            }
            patch = {
                "mode": "yolo",
                "agent": agent,
                "phases": ["implementation"],
                "feedbackLoops": ["none"],
                "parallelBattles": count,
                "autoCommit": True,
            }
            if window is not None:
                patch["outputCoalesceMs"] = window
            daemon.call("config.update", {"repo": str(repo), "patch": patch})
            for k in range(count):
                daemon.call(
                    "task.create",
                    {
                        "repo": str(repo),
                        "title": f"Stream {k}",
                        "description": "d",
                        "acceptanceCriteria": ["c"],
                    },
                )
            tasks += count

        # the clients, each in a process of its own (they share the two cores with it all)
        receivers: list[tuple[Tally, Any]] = []
        for i in range(subscribers + 1):
            last = i == subscribers
            name = "websocket" if last else f"subscriber {i + 1}"
            # measured in full: the first and last subscribers (fan-out order) and the page
            counts = last or i < measure // 2 or i >= subscribers - (measure - measure // 2)
            tally = Tally(name, measure=counts)
            ready = ctx.Event()
            receive, send = ctx.Pipe(duplex=False)
            if last:
                args: tuple[Any, ...] = (url, secret, tally, ready, target, stop, send)
                proc = ctx.Process(target=ws_receiver, args=args)
            else:
                args = (socket_path, tally, ready, target, stop, send)
                proc = ctx.Process(target=socket_receiver, args=args)
            proc.start()
            ready.wait(30)
            procs.append((proc, receive))
            receivers.append((tally, receive))
        ping_ready = ctx.Event()
        ping_receive, ping_send = ctx.Pipe(duplex=False)
        ping_proc = ctx.Process(target=pinger, args=(socket_path, ping_ready, stop, ping_send))
        ping_proc.start()
        ping_ready.wait(30)
        procs.append((ping_proc, ping_receive))

        sampler = Sampler(daemon.pid)
        sampler.start()
        with daemon.connect(timeout=seconds * 4 + 600) as conn:
            conn.call("events.subscribe", {"types": ["battle_complete", "battle_failed"]})
            t0, t0_wall = time.monotonic(), time.time()
            answered: list[float] = []

            def start(repo: Path) -> None:
                # each repository's from a thread of its own: under the load of the first
                # ones, a later start may take long to be answered (it is reported)
                with daemon.connect(timeout=600) as own:
                    own.call("battle.start", {"repo": str(repo), "all": True, "maxIterations": 1})
                answered.append(time.monotonic() - t0)

            starters = [threading.Thread(target=start, args=(repo,)) for repo in paths]
            for thread in starters:
                thread.start()
            ended: Counter[str] = Counter()
            for message in conn.messages():
                if message.get("method") == "event":
                    ended[message["params"]["type"]] += 1
                    if sum(ended.values()) == battles:
                        break
            t_end = time.monotonic()
            for thread in starters:
                thread.join()
        clients_cpu = cpu_of([proc.pid for proc, _ in procs])
        pids = [proc.pid for proc, _ in procs]  # the subscribers, the WebSocket, the pinger
        kinds = {
            "subscribers": pids[:subscribers],
            "WebSocket": pids[subscribers : subscribers + 1],
        }
        kinds["pinger"] = pids[subscribers + 1 :]
        split = ", ".join(f"{kind} {cpu_of(pids):.1f} s" for kind, pids in kinds.items())
        sampler.halt.set()
        sampler.join()
        children_cpu = sampler.children_cpu()
        target.value = daemon.call("daemon.status")["seq"]
        tallies: list[Tally] = []
        for tally, receive in receivers:
            tallies.append(receive.recv() if receive.poll(120) else tally)
        stop.set()
        latencies, ping_error = ping_receive.recv() if ping_receive.poll(60) else ([], "none")
        # how many events the history still holds: a resumption from 0 is told how many
        # it lost (replaying only the few battle_complete events still there)
        published = daemon.call("daemon.status")["seq"]
        with daemon.connect() as conn:
            reply = conn.call("events.subscribe", {"since": 0, "types": ["battle_complete"]})
        kept = published - int(reply.get("lost") or 0)

        printed = {}
        for f in out_dir.iterdir():
            record = json.loads(f.read_text())
            printed[record["tag"]] = record["printed"]
        total = sum(printed.values())
        wall = t_end - t0
        s_end = sampler.samples[-1]
        cpu = s_end[1] - sampler.samples[0][1]
        peak_agents = max(s[3] for s in sampler.samples)
        table.add(
            f"stream: {battles} battles in {len(paths)} repos, {rate:.0f} lines/s x {seconds:.0f} s",
            f"{total:,} lines",
            f"of {int(rate * seconds) * battles:,} due; {peak_agents} agents at once at most "
            f"(maxConcurrentBattles ≤ {MAX_CONCURRENT}); {wall:.1f} s wall; "
            f"{ended['battle_failed']} failed; {subscribers} subscribers + the WebSocket; "
            f"the last battle.start answered after {max(answered):.1f} s",
        )
        measured = [t for t in tallies if t.measure and t.name != "websocket"]
        page = [t for t in tallies if t.name == "websocket"]
        table.add(
            "  agent line written → subscriber p50 / p99",
            ms2(pcts(merged(measured, "since_written"), 50, 99)),
            f"target p99 <100 ms; at {', '.join(t.name for t in measured)} (every "
            f"{SAMPLED}th line of each battle timed, every line counted)",
        )
        # while every battle streams: from STEADY_AFTER s after the last start was
        # answered to STEADY_BEFORE_END s before the first agents are done (wall clock)
        calm_from = math.ceil(t0_wall + max(answered) + STEADY_AFTER)
        calm_until = math.floor(t0_wall + min(answered) + seconds - STEADY_BEFORE_END)
        calm_lines: Counter[int] = Counter()
        for t in measured:
            for second, histogram in t.by_second.items():
                if calm_from <= second < calm_until:
                    calm_lines.update(histogram)
        table.add(
            "  the same while every battle streams",
            ms2(pcts(calm_lines, 50, 99)),
            f"lines written from {calm_from - t0_wall:.1f} to {calm_until - t0_wall:.1f} s: "
            f"{STEADY_AFTER} s after the last start was answered to {STEADY_BEFORE_END} s "
            f"before the first agents were done. Around it {battles} battles start at once "
            "(each a sandbox, its bridge and an agent: three processes, two of them Python) "
            "and end at once (their feedback loops, commits and merges back), on the same cores",
        )
        late = merged(measured, "late")
        if late:
            first = int(t0_wall)
            worst = ", ".join(f"{s - first} s: {n:,}" for s, n in sorted(late.items())[:40] if n)
            table.add(
                "  lines later than 100 ms, by second they were written",
                f"~{sum(late.values()):,}",
                f"of {sum(t.arrived for t in measured):,} received at the measuring receivers "
                f"(from the timed lines, x{SAMPLED}); "
                f"by the second of the run they were written: {worst}",
            )
            table.add(
                "  the daemon around them",
                "",
                "each second of the run, the daemon's CPU and its event loop's wait for a CPU "
                "(ms), and the agents running: "
                + ", ".join(sampler.second(t0, t0_wall, s - first) for s in sorted(late)[:40]),
            )
        table.add(
            "  agent line due → subscriber p50 / p99",
            ms2(pcts(merged(measured, "since_due"), 50, 99)),
            "adds the time an agent was held back (full pipe, busy machine)",
        )
        table.add(
            "  agent line written → dashboard WebSocket p50 / p99",
            ms2(pcts(merged(page, "since_written"), 50, 99)),
            f"due → WebSocket {ms2(pcts(merged(page, 'since_due'), 50, 99))}",
        )
        table.add(
            "  daemon CPU per 1,000 lines",
            f"{cpu / max(total, 1) * 1e6:.1f} ms",
            f"{cpu:.1f} s CPU over {wall:.1f} s ({cpu / wall * 100:.0f}% of a core)",
        )

        waited = sampler.waited[-1] - sampler.waited[0]
        agents_cpu = sum(sampler.agent_cpu.values())
        table.add(
            "  the machine's CPU over the run: daemon / the agents / the clients",
            f"{cpu:.1f} / {agents_cpu:.1f} / {clients_cpu:.1f} s",
            f"of {wall * psutil.cpu_count():.0f} CPU-s on {psutil.cpu_count()} CPUs in "
            f"{wall:.1f} s (the agents' sampled twice a second; the daemon's reaped "
            f"children, git and what the sandbox lets it count, {children_cpu:.1f} s; "
            f"clients: the {subscribers} subscribers, the WebSocket and the pinger: {split}); "
            f"load average {os.getloadavg()[0]:.1f} at the end",
        )
        table.add(
            "  the host: a fixed Python loop before the run",
            f"{speed:.1f} M/s",
            "iterations a second of the same pure-Python loop, timed alone just before the "
            "run: runs on a slower host (a shared VM) are slower throughout, and this says "
            "how much slower the host was, apart from the code",
        )
        table.add(
            "  daemon's event loop waiting for a CPU",
            f"{waited:.1f} s",
            f"of {wall:.1f} s wall: runnable, but the CPUs were busy (/proc schedstat)",
        )

        def rss_at(t: float) -> str:
            return f"{sampler.at(t0 + t)[2] / 2**20:.0f}"

        peak_rss = max(s[2] for s in sampler.samples)
        table.add(
            "  daemon RSS at 10 s / 30 s / end (MiB)",
            f"{rss_at(10)} / {rss_at(30)} / {s_end[2] / 2**20:.0f}",
            f"peak {peak_rss / 2**20:.0f} MiB",
        )
        mean_event = sum(t.received for t in tallies[:1]) / max(1, tallies[0].events)
        table.add(
            "  event history at the end",
            f"{kept:,} events",
            f"of {published:,} published; bounds 10,000 events / 32 MiB "
            f"({'the bytes bound' if kept < min(10_000, published) else 'neither'} reached; "
            f"events averaged {mean_event / 1024:.1f} KiB at subscriber 1)",
        )
        coalesced = max((sum(t.coalesced.values()) for t in tallies), default=0)
        table.add(
            "  lines coalesced away (announced)",
            f"{coalesced:,}",
            "said in the battle's iteration_output: '[N chunks coalesced away; see the log]'",
        )
        overflowed = [t for t in tallies if t.overflows or t.drops]
        table.add(
            "  subscribers overflowed (events.overflow)",
            f"{len(overflowed)} of {len(tallies)}",
            f"{sum(t.lost_events for t in tallies):,} events lost past the history "
            "(the resubscription's reply says so); the WebSocket closed under its reader "
            f"{sum(t.drops for t in tallies)} times (it resumed with since)",
        )
        # A receiver that overflowed was told (events.overflow) and lost whole events
        # past the history: its shortfall was announced, at the event's grain.
        unannounced, by_overflow, checks, totals = 0, 0, 0, 0
        for t in tallies:
            if t.error:
                print(f"  ({t.name} stopped: {t.error})", flush=True)
            if t.measure:
                short = sum(
                    max(0, n - t.per_battle[tag.encode()] - t.coalesced[tag])
                    for tag, n in printed.items()
                )
            else:
                short = max(0, total - t.lines - sum(t.coalesced.values()))
            if t.overflows or t.lost_events or t.drops:
                by_overflow += short
            else:
                unannounced += short
                checks += t.measure
                totals += not t.measure
        table.add(
            "  lines lost and not announced",
            f"{unannounced:,}",
            f"arrived + announced == printed: per battle at {checks}, in total at {totals} "
            f"receivers that never overflowed; the {len(overflowed)} that did lost "
            f"{by_overflow:,} line-receipts in events they were told of",
        )
        if latencies:
            ping = sorted(rtt for _, rtt in latencies)
            table.add(
                f"  ping from another client p50 / p99 ({PING_HZ} Hz)",
                ms2([ping[len(ping) // 2], ping[min(len(ping) - 1, int(0.99 * len(ping)))]]),
                f"target p99 <50 ms; max {ping[-1] * 1000:.0f} ms, {len(ping)} pings",
            )
            # while every battle streams: from STEADY_AFTER s after the last start was
            # answered to STEADY_BEFORE_END s before the first agents are done
            begin = t0 + max(answered) + STEADY_AFTER
            until = t0 + min(answered) + seconds - STEADY_BEFORE_END
            calm = sorted(rtt for sent, rtt in latencies if begin <= sent < until)
            if calm:
                table.add(
                    "  the same while every battle streams",
                    ms2([calm[len(calm) // 2], calm[int(0.99 * len(calm))]]),
                    f"max {calm[-1] * 1000:.0f} ms, {len(calm)} pings from "
                    f"{begin - t0:.1f} to {until - t0:.1f} s",
                )
        if ping_error:
            print(f"  (the pinger stopped: {ping_error})", flush=True)
    finally:
        stop.set()
        for proc, _receive in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
        daemon.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battles", type=int, default=100)
    parser.add_argument("--repos", type=int, default=10)
    parser.add_argument("--rate", type=float, default=1000, help="lines a second per agent")
    parser.add_argument("--seconds", type=float, default=30, help="how long each agent prints")
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument(
        "--measure", type=int, default=2, help="subscribers counting every line per battle"
    )
    parser.add_argument(
        "--window", type=int, default=None, help="outputCoalesceMs (default: the config's)"
    )
    parser.add_argument(
        "--tick",
        type=int,
        default=10,
        help="ms between an agent's writes (it writes what is due at each)",
    )
    parser.add_argument(
        "--run-nice", type=int, default=None, help="the daemon's --run-nice (default: its own)"
    )
    args = parser.parse_args(argv)
    table = Table()
    run(
        table,
        args.battles,
        args.repos,
        args.rate,
        args.seconds,
        args.subscribers,
        args.measure,
        args.window,
        args.tick,
        args.run_nice,
    )
    print()
    print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
