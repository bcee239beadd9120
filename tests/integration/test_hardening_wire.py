"""Attacks on the wire, each against a real daemon: hostile bytes in both framings, a
descriptor flood, clients that stall everyone or read too slowly, and every bound.

After each attack class the daemon must be alive and answer another client's ping.
The bulk of the fuzzing (20,000 seeded frames; 500,000 under ``POKERALPH_FUZZ=deep``, another
seed with ``FUZZ_SEED``) goes in-process through the same decoder and connection code a
socket feeds, for speed; a few thousand frames go over a real socket.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import os
import random
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from pokeralphd.settings import DaemonSettings
from tests.helpers import (
    DaemonProcess,
    SettingsDaemon,
    blocking_question,
    events_of,
    fuzz_cases,
    make_git_repo,
    ping_within,
    raw_request,
    read_messages,
    short_tmpdir,
    wait_until,
)
from tests.inproc import ThreadedDaemon

LIVENESS = 2.0  # seconds another client's ping may take, during or after any attack
PING_PACE = 0.01  # seconds between the pings of pinging()
MAX_REPLY = 4 << 20
STALL = 2.0  # the wire daemon's sendStallTimeout: the slow reader beats it 6x per 64 KiB
SHORT_STALL = 0.2  # the stalled-client daemon's: those tests wait on it
HISTORY_BYTES = 1 << 20
MAX_PENDING = 8
KNOWN_CODES = {-32700, -32600, -32601, -32602} | set(range(-32099, -32000 + 1))


@pytest.fixture(scope="module")
def wire() -> Iterator[SettingsDaemon]:
    """One daemon for most attacks (each test checks it survived)."""
    home = short_tmpdir("prw")
    daemon = SettingsDaemon(
        home,
        {
            "debugMethods": True,
            "maxReply": MAX_REPLY,
            "sendStallTimeout": STALL,
            "eventHistoryBytes": HISTORY_BYTES,
            "maxSubscriberBacklog": 256 << 10,
            "maxPending": MAX_PENDING,
        },
    ).start()
    yield daemon
    daemon.stop()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def stalls() -> Iterator[ThreadedDaemon]:
    """A daemon in this process with a short sendStallTimeout, for the clients that stop
    reading: how long they are given is that timeout, and the tests wait it out."""
    home = short_tmpdir("prs")
    settings = DaemonSettings(
        debug_methods=True,
        send_stall_timeout=SHORT_STALL,
        max_subscriber_backlog=256 << 10,
    )
    daemon = ThreadedDaemon(home, settings).start()
    yield daemon
    daemon.stop()
    shutil.rmtree(home, ignore_errors=True)


def alive(daemon: DaemonProcess) -> None:
    assert daemon.running(), daemon.logs()[-3000:]
    ping_within(daemon, LIVENESS)


def exchange(daemon: DaemonProcess, payload: bytes, timeout: float = 10) -> bytes:
    """Send ``payload`` (from a thread, reading meanwhile: a client that pipelines more
    than the buffers hold must read as it sends), half-close, and read everything until
    the daemon closes."""
    with daemon.raw() as sock:
        sock.settimeout(timeout)

        def send() -> None:
            try:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the daemon may close first (a framing it cannot recover from)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        chunks = []
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        sender.join(timeout)
    return b"".join(chunks)


def lines(data: bytes) -> list[Any]:
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]


def lsp_frames(data: bytes) -> list[Any]:
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: "), data[:100]
        length = int(head[16:])
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


def lsp(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@contextmanager
def pinging(daemon: DaemonProcess) -> Iterator[list[float]]:
    """Another client pinging sequentially during the block; every ping within LIVENESS.

    A ping goes out every PING_PACE seconds (a stall of the daemon shows as a ping that
    waits for it), not back to back: that only burnt both processes' CPU."""
    latencies: list[float] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with daemon.raw() as sock:
                i = 0
                while not stop.is_set():
                    i += 1
                    t0 = time.monotonic()
                    sock.sendall(raw_request("daemon.ping", i))
                    reply = read_messages(sock, 1, timeout=LIVENESS * 5)[0]
                    latencies.append(time.monotonic() - t0)
                    assert reply == {"jsonrpc": "2.0", "id": i, "result": "pong"}
                    stop.wait(PING_PACE)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_until(lambda: latencies or failure, 10, "the first ping")
    try:
        yield latencies
    finally:
        stop.set()
        thread.join(LIVENESS * 5)
    assert not failure, failure
    assert max(latencies) < LIVENESS, f"a ping took {max(latencies):.2f}s"


def check_reply(reply: Any) -> None:
    """A JSON-RPC response (or batch of them) and never an internal error."""
    for item in reply if isinstance(reply, list) else [reply]:
        assert item["jsonrpc"] == "2.0" and "id" in item, item
        assert ("result" in item) != ("error" in item), item
        if "error" in item:
            assert item["error"]["code"] in KNOWN_CODES, item


# ------------------------------------------------------------------ hostile bytes


@pytest.mark.parametrize(
    "payload",
    [
        b'"\x80"\n',
        b'{"jsonrpc":"2.0","id":1,"method":"\x80"}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{"a":"\xed\xa0\x80"}}\n',
        b'[{"jsonrpc":"2.0","id":1,"method":"daemon.ping"},"\xff"]\n',
        lsp(b'"\x80"'),
        lsp(b'{"jsonrpc":"2.0","id":1,"method":"\xc3"}'),
    ],
    ids=["string", "method", "surrogate", "batch", "lsp-string", "lsp-method"],
)
def test_invalid_utf8_is_a_parse_error_and_ends_nothing(
    wire: SettingsDaemon, payload: bytes
) -> None:
    """Four bytes (a string holding \\x80, a newline) used to end the daemon."""
    data = exchange(wire, payload)
    (reply,) = lsp_frames(data) if payload.startswith(b"Content") else lines(data)
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    assert "utf-8" in reply["error"]["data"]["detail"]
    alive(wire)


@pytest.mark.parametrize("depth", [129, 983, 5_000, 200_000])
@pytest.mark.parametrize("framing", ["line", "lsp"])
def test_deep_nesting_is_a_parse_error_in_either_framing(
    wire: SettingsDaemon, depth: int, framing: str
) -> None:
    """Nesting of 983 or more used to raise RecursionError and end the daemon."""
    bodies = [
        b"[" * depth + b"]" * depth,
        b'{"jsonrpc":"2.0","id":3,"method":"daemon.ping","params":{"a":'
        + b"[" * depth
        + b"]" * depth
        + b"}}",
        b'{"a":' * depth,  # unclosed
    ]
    for body in bodies:
        if len(body) > 1 << 20:
            continue
        if framing == "line":
            (reply,) = lines(exchange(wire, body + b"\n"))
        else:
            (reply,) = lsp_frames(exchange(wire, lsp(body)))
        assert reply["error"]["code"] == -32700, reply
        assert "128" in reply["error"]["data"]["detail"]
    alive(wire)


# A seeded generator of hostile frames: random bytes, truncated and mutated JSON,
# invalid UTF-8, deep nesting, odd ids and members, batches; and odd LSP headers.
SAFE_METHODS = [
    "daemon.ping",
    "daemon.status",
    "no.such.method",
    "task.get",
    "events.unsubscribe",
    "inbox.wait",  # a long wait: goes beside the reader (and fails at once here)
    "inbox.get",
    "",
]
BAD_BYTES = [b"\x80", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\\u"]
ODD_VALUES: list[Any] = [None, True, 1e308, -0.0, 2**70, "", "x" * 50, [], {}, [1, [2]], {"a": 1}]


def valid_request(rng: random.Random) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": rng.choice(SAFE_METHODS)}
    if rng.random() < 0.8:
        message["id"] = rng.choice([rng.randint(-5, 10**6), f"id-{rng.randint(0, 99)}", None])
    if rng.random() < 0.5:
        message["params"] = rng.choice(
            [
                {"taskId": rng.choice(["001-a", "../x", "", "x" * 300])},
                {"id": f"d-{rng.randint(0, 9)}", "timeout": 0},
                {"subscription": rng.randint(-1, 5)},
                [rng.choice(ODD_VALUES)],
                {"unexpected": rng.choice(ODD_VALUES)},
            ]
        )
    return message


def odd_request(rng: random.Random) -> Any:
    message = valid_request(rng)
    key = rng.choice(["jsonrpc", "method", "id", "params", "extra"])
    message[key] = rng.choice(ODD_VALUES)
    if rng.random() < 0.2:
        return rng.choice(ODD_VALUES)
    return message


NEST_OPENERS = [b"[", b'{"k":', b'["]",']
NEST_CLOSERS = {b"[": b"]", b'{"k":': b"}", b'["]",': b"]"}


def nested(rng: random.Random) -> bytes:
    depth = rng.choice([rng.randint(1, 140), rng.randint(100, 3000)])
    pieces = rng.choices(NEST_OPENERS, k=depth)
    inner = b"".join(pieces) + b"1"
    if rng.random() < 0.7:
        inner += b"".join(map(NEST_CLOSERS.__getitem__, reversed(pieces)))
    if rng.random() < 0.5:
        return b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":[' + inner + b"]}"
    return inner


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(buf))
        choice = rng.random()
        if choice < 0.4:
            buf[pos:pos] = rng.choice([*BAD_BYTES, b'"', b"[", b"}", b",", b"\\"])
        elif choice < 0.7 and buf:
            del buf[pos : pos + rng.randint(1, 8)]
        elif buf:
            buf[min(pos, len(buf) - 1)] = rng.randint(0, 255)
    return bytes(buf)


def hostile_body(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.12:
        return rng.randbytes(rng.randint(0, 120))
    if kind < 0.30:
        return json.dumps(valid_request(rng)).encode()
    if kind < 0.42:
        full = json.dumps(valid_request(rng)).encode()
        return full[: rng.randint(0, len(full))]
    if kind < 0.60:
        return mutate(json.dumps(valid_request(rng)).encode(), rng)
    if kind < 0.70:
        text = json.dumps(valid_request(rng)).encode()
        quote = text.find(b'"', text.find(b"method") + 9)
        return text[: quote + 1] + rng.choice(BAD_BYTES) + text[quote + 1 :]
    if kind < 0.78:
        return nested(rng)
    if kind < 0.90:
        return json.dumps(odd_request(rng)).encode()
    items = [
        rng.choice([valid_request(rng), odd_request(rng), rng.choice(ODD_VALUES)])
        for _ in range(rng.randint(0, 12))
    ]
    body = json.dumps(items).encode()
    return mutate(body, rng) if rng.random() < 0.3 else body


def some_body(rng: random.Random, corpus: list[bytes] | None) -> bytes:
    """A fresh hostile body, or (for bulk) one from a corpus, mutated a third of the time."""
    if corpus is None:
        return hostile_body(rng)
    body = rng.choice(corpus)
    return mutate(body, rng) if rng.random() < 0.3 else body


def line_frame(rng: random.Random, corpus: list[bytes] | None = None) -> bytes:
    body = some_body(rng, corpus)
    ends = rng.choice([b"\n", b"\r\n", b"\n\n", b" \n"])
    return rng.choice([b"", b" ", b"\r\n"]) + body + ends


def lsp_frame(rng: random.Random, corpus: list[bytes] | None = None) -> bytes:
    body = some_body(rng, corpus)
    length = b"%d" % len(body)
    odd_headers: list[list[bytes]] = [
        [b"Content-Length: +" + length],
        [b"Content-Length: " + length[:1] + b"_" + length[1:]],
        [b"Content-Length: " + length, b"Content-Length: " + length],
        [b"Content-Length: " + b"9" * rng.randint(8, 40)],
        [b"Content-Length: %d" % max(0, len(body) + rng.randint(-5, 5))],
        [b"Content-Length " + length],  # no colon
        [b"Content-Length: \xd9\xa2"],  # a non-ASCII digit
        [mutate(b"Content-Length: " + length, rng)],
        [b"Content-Type: x", b"X-Other: " + rng.randbytes(rng.randint(0, 30))],
    ]
    if rng.random() < 0.2:  # most frames well framed, the rest odd in one way
        headers = rng.choice(odd_headers)
    else:
        headers = [b"Content-Length: " + length]
        if rng.random() < 0.3:
            headers.insert(0, b"Content-Type: application/vscode-jsonrpc; charset=utf-8")
    return b"\r\n".join(headers) + b"\r\n\r\n" + body


class Wire(anyio.abc.ByteStream):
    """A client's side of one connection, in memory, as the connection sees it through
    its public seam (:meth:`ClientConnection.serve`): the reads it gets (``pieces``, then
    the end of the stream, once ``until`` holds of what it was sent when given), and
    every byte it writes back (``sent``)."""

    def __init__(self, pieces: list[bytes], until: Any = None) -> None:
        self.pieces = collections.deque(pieces)
        self.sent = bytearray()
        self.until = until
        self._done = anyio.Event()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self.pieces:
            return self.pieces.popleft()
        if self.until is not None and not self.until(bytes(self.sent)):
            await self._done.wait()
        raise anyio.EndOfStream

    async def send(self, item: bytes) -> None:
        self.sent += item
        if self.until is not None and self.until(bytes(self.sent)):
            self._done.set()

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def run_in_process_fuzz(frames: int, seed: int) -> dict[str, int]:
    """Feed ``frames`` hostile frames to in-process connections through their public
    seam (``serve`` on an in-memory stream), over many short streams in both framings;
    every reply is checked."""
    from pokeralph_core.userdirs import Paths
    from pokeralphd.daemon import Daemon
    from pokeralphd.server.connection import ClientConnection
    from pokeralphd.settings import DaemonSettings

    rng = random.Random(seed)
    corpus = [hostile_body(rng) for _ in range(3000)]
    tmp = short_tmpdir("prf")
    stats = {"frames": 0, "replies": 0, "closed": 0, "parse_errors": 0}

    async def main() -> None:
        daemon = Daemon(
            Paths(socket=tmp / "s", state_dir=tmp / "state", config_dir=tmp / "cfg"),
            DaemonSettings.model_validate({"maxMessage": 64 << 10}),
        )
        while stats["frames"] < frames:
            if rng.random() < 0.5:
                wire = Wire(line_stream(rng, corpus, stats))
                await ClientConnection(daemon.server, wire).serve()
                count(lines(bytes(wire.sent)), stats)
            else:
                # LSP framing, a frame a connection: one that breaks the framing is
                # answered and closed, and the next starts afresh on a new one
                for frame in lsp_stream(rng, corpus, stats):
                    wire = Wire(cut(frame, rng))
                    await ClientConnection(daemon.server, wire).serve()
                    sent = bytes(wire.sent)
                    count(lsp_frames(sent) if sent.startswith(b"Content-") else lines(sent), stats)

    try:
        anyio.run(main)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


def line_stream(rng: random.Random, corpus: list[bytes], stats: dict[str, int]) -> list[bytes]:
    """Line framing never loses its way: reads of many frames at once, cut anywhere."""
    pieces: list[bytes] = []
    for _ in range(rng.randint(1, 10)):
        frames = [line_frame(rng, corpus) for _ in range(rng.randint(1, 40))]
        stats["frames"] += len(frames)
        pieces += cut(b"".join(frames), rng)
    return pieces


def lsp_stream(rng: random.Random, corpus: list[bytes], stats: dict[str, int]) -> list[bytes]:
    frames = [lsp_frame(rng, corpus) for _ in range(rng.randint(1, 200))]
    stats["frames"] += len(frames)
    return frames


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` as the reader gets it: whole, or cut anywhere."""
    if rng.random() < 0.5 or not data:
        return [data] if data else []
    cuts = sorted(rng.sample(range(len(data) + 1), min(3, len(data) + 1)))
    return [data[a:b] for a, b in pairwise(cuts, data) if b > a]


def count(replies: list[Any], stats: dict[str, int]) -> None:
    for reply in replies:
        check_reply(reply)
        stats["replies"] += 1
        error = reply.get("error", {}) if isinstance(reply, dict) else {}
        if error.get("code") == -32700:
            stats["parse_errors"] += 1
        hint = str((error.get("data") or {}).get("hint", ""))
        if error.get("code") == -32011 or "framing is lost" in hint:
            stats["closed"] += 1


def pairwise(cuts: list[int], data: bytes) -> list[tuple[int, int]]:
    return list(itertools.pairwise([0, *cuts, len(data)]))


FUZZ_FRAMES = fuzz_cases(20_000, 500_000)


def test_fuzz_frames_through_the_decoder_and_the_connection() -> None:
    seed = int(os.environ.get("FUZZ_SEED", "20240601"))
    stats = run_in_process_fuzz(FUZZ_FRAMES, seed)
    assert stats["frames"] >= FUZZ_FRAMES, f"seed {seed}"
    # The generator reaches every outcome often: answers, parse errors, closed framings.
    assert stats["replies"] > FUZZ_FRAMES // 2 and stats["parse_errors"] > FUZZ_FRAMES // 20
    assert stats["closed"] > FUZZ_FRAMES // 100, f"seed {seed}"


def test_fuzz_over_a_real_socket(wire: SettingsDaemon) -> None:
    rng = random.Random(7)
    sent = 0
    # Line framing: streams of frames on a few connections.
    for _ in range(4):
        payload = b"".join(line_frame(rng) for _ in range(750))
        sent += 750
        for reply in lines(exchange(wire, payload, timeout=30)):
            check_reply(reply)
        alive(wire)
    # LSP framing: a stream ends at the first frame that breaks the framing.
    for _ in range(150):
        payload = b"".join(lsp_frame(rng) for _ in range(10))
        sent += 10
        data = exchange(wire, payload)
        # A first header mangled past recognition makes it a line-framed connection.
        replies = lsp_frames(data) if data.startswith(b"Content-Length: ") else lines(data)
        for reply in replies:
            check_reply(reply)
    assert sent >= 4500
    alive(wire)


def test_a_bug_while_handling_a_message_is_answered_and_the_connection_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever escapes the handling of one message is -32603 for it (by its id), and
    the messages after it are served."""
    from pokeralph_core.userdirs import Paths
    from pokeralphd.daemon import Daemon
    from pokeralphd.protocol import jsonrpc
    from pokeralphd.server.connection import ClientConnection
    from pokeralphd.settings import DaemonSettings

    tmp = short_tmpdir("prf")

    async def call(request: jsonrpc.Request, ctx: Any) -> dict[str, Any]:
        if request.method != "daemon.ping":
            raise RuntimeError("a bug")
        return jsonrpc.result_response(request.id, "pong")  # type: ignore[arg-type]

    async def main() -> tuple[list[Any], list[Any]]:
        daemon = Daemon(
            Paths(socket=tmp / "s", state_dir=tmp / "state", config_dir=tmp / "cfg"),
            DaemonSettings(),
        )
        monkeypatch.setattr(daemon.server.dispatcher, "call", call)
        fast = [
            raw_request("daemon.status", 1).strip(),
            b'{"jsonrpc":"2.0","method":"daemon.status"}',  # a notification: no reply
            raw_request("daemon.ping", 2).strip(),
            raw_request("inbox.wait", 3, {"id": "x"}).strip(),  # beside the reader
        ]
        # More brackets than the fast path takes: the careful path, message by message.
        shallow = json.dumps([[] for _ in range(200)]).encode()
        careful = raw_request("daemon.status", 4).strip()[:-1] + b',"params":' + shallow + b"}"
        wire = Wire(
            [b"\n".join(fast) + b"\n", careful + b"\n[" + careful + b"]\n"],
            until=lambda sent: sent.count(b"\n") >= 5,  # every reply, the wait's included
        )
        with anyio.fail_after(10):
            await ClientConnection(daemon.server, wire).serve()
        replies = lines(bytes(wire.sent))
        waited = [r for r in replies if isinstance(r, dict) and r["id"] == 3]
        return [r for r in replies if r not in waited], waited

    try:
        replies, waited = anyio.run(main)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert [(r["id"], r.get("result") or r["error"]["code"]) for r in replies[:3]] == [
        (1, -32603),
        (2, "pong"),
        (4, -32603),
    ]
    assert [(r["id"], r["error"]["code"]) for r in replies[3]] == [(4, -32603)]  # a batch
    assert [(r["id"], r["error"]["code"]) for r in waited] == [(3, -32603)]


# ------------------------------------------------------------------ framing bounds


PING_47 = b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}'  # 47 bytes


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: +47",
        b"Content-Length: 4_7",
        b"Content-Length: 47\r\nContent-Length: 47",
        b"Content-Length: 1\r\nContent-Length: 47",
        b"Content-Length: " + b"4" * 30,
    ],
    ids=["sign", "underscore", "duplicate", "duplicate-last-wins", "absurd"],
)
def test_content_length_is_strict(wire: SettingsDaemon, header: bytes) -> None:
    """Python's int() took "+47" and "4_7", and the last of two headers won."""
    assert len(PING_47) == 47
    (reply,) = lsp_frames(exchange(wire, header + b"\r\n\r\n" + PING_47))
    assert reply["id"] is None and reply["error"]["code"] == -32700, reply
    assert "Content-Length" in reply["error"]["data"]["detail"]
    alive(wire)


def test_line_ends_cannot_hold_the_framing_undecided(wire: SettingsDaemon) -> None:
    """16 bytes of CR/LF then endless data used to be buffered without any limit."""
    data = exchange(wire, b"\r\n" * 8 + b"x" * (1536 << 10))
    (reply,) = lines(data)
    assert reply["error"]["code"] == -32011 and reply["error"]["data"]["limit"] == 1 << 20
    # Any amount of leading whitespace costs nothing, and the request after it is served.
    data = exchange(wire, b"\r\n" * (2 << 20) + raw_request("daemon.ping", 5))
    assert lines(data) == [{"jsonrpc": "2.0", "id": 5, "result": "pong"}]
    alive(wire)


# ------------------------------------------------------------ descriptors


def _at_least(items: list[Any], count: int) -> bool:
    return len(items) >= count


def open_clients(daemon: DaemonProcess, count: int) -> list[socket.socket]:
    socks = []
    for i in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(20)
        wait_until(functools.partial(connected, sock, daemon.socket), 20, "room in the backlog")
        try:
            sock.sendall(raw_request("daemon.ping", i))
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused already, before it could ask
        socks.append(sock)
    return socks


def connected(sock: socket.socket, path: Path) -> bool:
    try:
        sock.connect(str(path))
    except BlockingIOError:
        return False  # the listen backlog is full: the daemon has not caught up yet
    return True


def first_reply(sock: socket.socket) -> dict[str, Any]:
    buf = b""
    try:
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    except ConnectionResetError:
        pass
    assert b"\n" in buf, f"no reply: {buf!r}"
    reply: dict[str, Any] = json.loads(buf.split(b"\n", 1)[0])
    return reply


def test_connections_past_the_cap_are_refused_with_an_error(home: Path) -> None:
    """400 connections against RLIMIT_NOFILE 256 used to end the daemon."""
    daemon = SettingsDaemon(home, nofile=256).start()
    socks: list[socket.socket] = []
    try:
        socks = open_clients(daemon, 400)
        replies = [first_reply(s) for s in socks]
        served = [s for s, r in zip(socks, replies, strict=True) if r.get("result") == "pong"]
        refused = [r for r in replies if r.get("error", {}).get("code") == -32023]
        assert len(served) == 256 - 64 and len(served) + len(refused) == 400
        assert refused[0]["error"]["data"]["limit"] == 192
        assert any(r["id"] is not None for r in refused)  # told by id when it asked in time
        for sock in served[:10]:
            sock.close()
        wait_until(lambda: try_ping(daemon), 10, "a ping once some connections closed")
        assert "serving at most 192 connections" in daemon.logs()
    finally:
        for sock in socks:
            sock.close()
        assert daemon.stop() == 0


def try_ping(daemon: DaemonProcess) -> bool:
    try:
        with daemon.raw() as sock:
            sock.sendall(raw_request("daemon.ping"))
            return bool(first_reply(sock).get("result") == "pong")
    except (OSError, AssertionError):
        return False


def test_running_out_of_descriptors_does_not_end_the_daemon(home: Path) -> None:
    """With no descriptors in reserve, accept() fails with EMFILE: logged once, the
    waiting clients are told, the open connections are served, and it recovers."""
    daemon = SettingsDaemon(home, {"fdReserve": 0}, nofile=256).start()
    socks: list[socket.socket] = []
    try:
        socks = open_clients(daemon, 400)
        replies = [first_reply(s) for s in socks]
        served = [s for s, r in zip(socks, replies, strict=True) if r.get("result") == "pong"]
        refused = [r for r in replies if r.get("error", {}).get("code") == -32023]
        assert 150 < len(served) < 256 and len(served) + len(refused) == 400
        # The served ones are still served while descriptors are short.
        served[0].sendall(raw_request("daemon.status", "s"))
        assert first_reply(served[0])["result"]["clients"] == len(served)
        for sock in served[:50]:
            sock.close()
        wait_until(lambda: try_ping(daemon), 10, "a ping once descriptors are free")
        logs = daemon.logs()
        assert logs.count("out of file descriptors") == 1, logs[-3000:]
        assert "accepting connections again" in logs
    finally:
        for sock in socks:
            sock.close()
        assert daemon.stop() == 0


# ------------------------------------------------------------ fairness


def test_a_batch_of_300_discovers_does_not_stall_others(wire: SettingsDaemon) -> None:
    """A 17 KB batch of 300 rpc.discover used to block other clients for 12-20 s."""
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(300)]
    ).encode()
    assert len(batch) < 20_000
    with pinging(wire) as latencies:
        before = len(latencies)
        for _ in range(3):
            data = exchange(wire, batch + b"\n", timeout=30)
            (reply,) = lines(data)
            assert sorted(r["id"] for r in reply) == list(range(300))
        assert len(latencies) > before
    # Within max_reply: the first documents whole, the rest an error naming the limit.
    whole = [r for r in reply if "result" in r]
    cut = [r for r in reply if "error" in r]
    assert whole and cut and all(r["error"]["code"] == -32021 for r in cut)
    assert cut[0]["error"]["data"]["limit"] == MAX_REPLY
    assert len(data) <= MAX_REPLY + len(cut) * 400


def test_a_pipelined_flood_does_not_stall_others(wire: SettingsDaemon) -> None:
    count = fuzz_cases(15_000, 40_000)
    flood = raw_request("daemon.status", 1) * count
    with pinging(wire):
        replies = lines(exchange(wire, flood, timeout=60))
    assert len(replies) == count


# ------------------------------------------------------------ replies


def test_a_slow_reader_gets_a_whole_large_reply(wire: SettingsDaemon) -> None:
    """A reader draining a large reply for several stall timeouts gets all of it: the
    timeout bounds each 64 KiB, not the reply (a fixed 5 s window once cut such a reader
    off half-way)."""
    # ~1.6 MB of OpenRPC documents, whatever size the document grows to with new methods
    count = (1_600_000 // len(json.dumps(wire.call("rpc.discover")))) + 1
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(count)]
    ).encode()
    with wire.raw() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
        sock.sendall(batch + b"\n")
        t0 = time.monotonic()
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(16 << 10)
            assert chunk, f"closed after {len(data)} bytes"
            data += chunk
            # a slow client: 200 kB/s (each 64 KiB in ~0.33 s, well within the stall
            # timeout), so the ~1.45 MB reply takes over 7 s whatever sizes recv returns
            time.sleep(max(0.0, t0 + len(data) / 200_000 - time.monotonic()))
        elapsed = time.monotonic() - t0
    reply = json.loads(data)
    assert len(reply) == count and all("result" in r for r in reply), [
        r for r in reply if "result" not in r
    ][:1]
    # longer than the old fixed window (5 s) and than two stall timeouts
    assert elapsed > max(5.5, 2 * STALL), f"drained in {elapsed:.1f}s: too fast to show the fix"
    alive(wire)


def test_a_reader_that_stops_is_disconnected_and_others_go_on(stalls: ThreadedDaemon) -> None:
    wire = stalls
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(60)]
    ).encode()
    clients = wire.call("daemon.status")["clients"]
    stalled = wire.raw()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        stalled.sendall(batch + b"\n")
        with pinging(wire):
            wait_until(
                lambda: f"read nothing for {SHORT_STALL:g} s" in wire.logs(),
                SHORT_STALL + 10,
                "the stall to be noticed",
            )
        wait_until(
            lambda: wire.call("daemon.status")["clients"] <= clients, 10, "the stalled one gone"
        )
    finally:
        stalled.close()
    alive(wire)


def test_a_reply_over_the_limit_is_an_error_with_size_limit_and_hint(
    wire: SettingsDaemon,
) -> None:
    repo = make_git_repo(wire.home / "big-replies")
    wire.call("repo.register", {"path": str(repo)})
    big = "d" * 900_000
    with wire.connect() as conn:
        for i in range(5):
            conn.call(
                "task.create",
                {
                    "title": f"Big {i}",
                    "description": big,
                    "acceptanceCriteria": ["c"],
                    "repo": str(repo),
                },
            )
    with wire.raw() as sock:
        sock.sendall(raw_request("task.list", 9, {"repo": str(repo)}))
        (reply,) = read_messages(sock, 1)
    error = reply["error"]
    assert reply["id"] == 9 and error["code"] == -32021
    assert error["data"]["size"] > MAX_REPLY and error["data"]["limit"] == MAX_REPLY
    assert "paging" in error["data"]["hint"]
    alive(wire)


# ------------------------------------------------------------ bounded resources


def test_batch_items_are_bounded(wire: SettingsDaemon) -> None:
    pings = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "daemon.ping"} for i in range(1001)]
    ).encode()
    (reply,) = lines(exchange(wire, pings + b"\n"))
    assert reply["error"]["code"] == -32600 and reply["error"]["data"]["limit"] == 1000
    ok = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "daemon.ping"} for i in range(1000)]
    ).encode()
    (reply,) = lines(exchange(wire, ok + b"\n"))
    assert len(reply) == 1000
    # 524,286 tiny requests in 1 MiB used to give a 50 MB reply and stall others' pings.
    tiny = b"[" + b"1," * 524_286 + b"1]\n"
    assert len(tiny) <= 1 << 20
    with pinging(wire):
        for _ in range(3):
            data = exchange(wire, tiny, timeout=30)
            (reply,) = lines(data)
            assert reply["error"]["code"] == -32600 and len(data) < 1000
    alive(wire)


def test_long_waits_per_connection_are_bounded(wire: SettingsDaemon) -> None:
    """20,000+ inbox.wait on one connection used to be held, ~400 MiB of them."""
    wait = blocking_question(wire, "waits", 60)
    with wire.raw() as sock:
        sock.sendall(b"".join(raw_request("inbox.wait", i, wait) for i in range(MAX_PENDING)))
        sock.sendall(raw_request("inbox.wait", "over", wait) + raw_request("daemon.ping", "p"))
        over, pong = read_messages(sock, 2, timeout=5)
        assert over["id"] == "over" and over["error"]["code"] == -32022
        assert over["error"]["data"]["limit"] == MAX_PENDING
        assert pong == {"jsonrpc": "2.0", "id": "p", "result": "pong"}
        # A batch holding a long wait is refused whole, each request by its id.
        batch = [
            {"jsonrpc": "2.0", "id": "b1", "method": "inbox.wait", "params": wait},
            {"jsonrpc": "2.0", "id": "b2", "method": "daemon.ping"},
        ]
        sock.sendall(json.dumps(batch).encode() + b"\n")
        (refused,) = read_messages(sock, 1, timeout=5)
        assert [(r["id"], r["error"]["code"]) for r in refused] == [
            ("b1", -32022),
            ("b2", -32022),
        ]
        wire.call("inbox.answer", {"id": wait["id"], "values": {"value": True}})
        answered = read_messages(sock, MAX_PENDING, timeout=10)
        assert sorted(r["id"] for r in answered) == list(range(MAX_PENDING))
        # Slots are free again.
        sock.sendall(raw_request("inbox.wait", "again", {**wait, "timeout": 0}))
        (again,) = read_messages(sock, 1, timeout=5)
        assert again["id"] == "again" and "result" in again
    alive(wire)


def test_event_history_is_bounded_by_bytes(wire: SettingsDaemon) -> None:
    """200-300 updates of 900 KB used to be kept by count only (~200 MiB)."""
    start = wire.call("daemon.status")["seq"]
    wire.call("debug.emit", {"count": 100, "size": 60_000})
    sock = wire.raw()
    try:
        sock.sendall(raw_request("events.subscribe", 1, {"since": start, "types": ["debug"]}))
        (reply,) = read_messages(sock, 1)
    finally:
        sock.close()
    result = reply["result"]
    assert 0 < result["replayed"] <= HISTORY_BYTES // 60_000
    assert result["lost"] == 100 - result["replayed"]
    assert result["oldestSeq"] == start + 100 - result["replayed"] + 1
    alive(wire)


def test_a_stalled_subscriber_is_dropped_while_others_get_every_event(
    stalls: ThreadedDaemon,
) -> None:
    wire = stalls
    stalled = wire.raw()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(raw_request("events.subscribe", 1, {"types": ["debug"]}))
    assert read_messages(stalled, 1)[0]["id"] == 1
    clients = wire.call("daemon.status")["clients"]
    try:
        with wire.connect() as watcher:
            watcher.call("events.subscribe", {"types": ["debug"]})
            got: list[dict[str, Any]] = []
            reader = threading.Thread(
                target=lambda: got.extend(events_of(watcher, last_of(800), timeout=30))
            )
            reader.start()
            with pinging(wire):
                for burst in range(1, 9):  # 880 KB: past the backlog and the kernel's buffers
                    wire.call("debug.emit", {"count": 100, "size": 1000})
                    # The watcher keeps up (a slow test machine must not overflow it too).
                    wait_until(
                        functools.partial(_at_least, got, 100 * burst), 20, "the watcher's events"
                    )
            reader.join(30)
            assert len(got) == 800 and [e["payload"]["i"] for e in got[-100:]] == list(range(100))
            wait_until(
                lambda: wire.call("daemon.status")["clients"] < clients + 1,
                10,
                "the stalled subscriber to be dropped",
            )
    finally:
        stalled.close()
    alive(wire)


def last_of(count: int) -> Callable[[dict[str, Any]], bool]:
    seen = [0]

    def until(_event: dict[str, Any]) -> bool:
        seen[0] += 1
        return seen[0] >= count

    return until
