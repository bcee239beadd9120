"""The wire's bounds, part by part: framing, decoding, the event history, the discover
cache, the outbox's writes, the accept loop and the settings that document them."""

from __future__ import annotations

import gc
import json
import logging
import random
import resource
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pokeralphd.protocol import events as ev
from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.framing import (
    DETECT_PREFIX,
    FrameDecoder,
    FrameError,
    FrameTooLarge,
)
from pokeralphd.server.accept import Acceptor, connection_cap
from pokeralphd.server.eventbus import EventBus
from pokeralphd.server.outbox import Outbox
from pokeralphd.settings import DaemonSettings
from tests.helpers import fuzz_cases, short_tmpdir

# ------------------------------------------------------------------------- framing


def test_leading_whitespace_is_discarded_while_the_framing_is_undecided() -> None:
    decoder = FrameDecoder(max_message=1024)
    for _ in range(160):  # 10 MiB of line ends, more than any limit
        assert decoder.feed(b"\r\n" * 32768) == []
        assert decoder.buffered == 0 and decoder.mode is None
    assert decoder.feed(b' {"a": 1}\n') == [b'{"a": 1}']
    assert decoder.mode == "line"


def test_line_ends_first_cannot_bypass_the_size_limit() -> None:
    """16 bytes of CR/LF used to leave the framing undecided forever, buffering all."""
    decoder = FrameDecoder(max_message=1024)
    decoder.feed(b"\r\n" * 8)
    decoder.feed(b"x" * 600)
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"x" * 600)


def test_a_header_prefix_waits_for_at_most_a_few_bytes() -> None:
    decoder = FrameDecoder(max_message=1024)
    assert decoder.feed(b"\r\nContent-Len") == [] and decoder.mode is None
    assert decoder.buffered <= DETECT_PREFIX
    assert decoder.feed(b"gth: 2\r\n\r\n{}") == [b"{}"] and decoder.mode == "lsp"
    # One byte that cannot start a header decides at once.
    other = FrameDecoder(max_message=1024)
    assert other.feed(b"Cx") == [] and other.mode == "line"


def lsp_headers(*lines: bytes) -> bytes:
    return b"\r\n".join(lines) + b"\r\n\r\n"


@pytest.mark.parametrize(
    "value",
    [
        b"+2",
        b"0_2",
        b"2 2",
        b"-2",
        b"0x2",
        "\u0662".encode(),  # ARABIC-INDIC DIGIT TWO: int() would take it
        b"",
        b"2.0",
        b"1" * 13,
        b"1" * 5000,
    ],
)
def test_content_length_takes_only_ascii_digits(value: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(lsp_headers(b"Content-Length: " + value) + b"{}")


@pytest.mark.parametrize("value", [b"2", b" 2 ", b"\t2", b"0002"])
def test_content_length_in_plain_digits_is_read(value: bytes) -> None:
    assert FrameDecoder().feed(lsp_headers(b"Content-Length:" + value) + b"{}") == [b"{}"]


def test_duplicate_content_length_is_refused_even_when_equal() -> None:
    for second in (b"Content-Length: 2", b"content-length: 99"):
        with pytest.raises(FrameError, match="more than one"):
            FrameDecoder().feed(lsp_headers(b"Content-Length: 2", second) + b"{}")


def test_absurd_lengths_are_refused_before_any_body_is_buffered() -> None:
    decoder = FrameDecoder(max_message=1 << 20)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(lsp_headers(b"Content-Length: 999999999999"))
    assert info.value.size == 999_999_999_999 and info.value.limit == 1 << 20


def test_a_header_name_is_matched_exactly() -> None:
    with pytest.raises(FrameError, match="without a Content-Length"):
        FrameDecoder().feed(lsp_headers(b"Content-Length : 2") + b"{}")


def test_an_endless_header_block_is_refused() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"Content-Type: x\r\n")
    with pytest.raises(FrameError, match="header block"):
        for _ in range(20):
            decoder.feed(b"X-Pad: " + b"y" * 1000 + b"\r\n")


# ------------------------------------------------------------------------ decoding

INVALID_UTF8 = [
    b'"\x80"',
    b'{"jsonrpc":"2.0","method":"\x80","id":1}',
    b'{"jsonrpc":"2.0","method":"daemon.ping","id":"\xff\xfe"}',
    b'["\xed\xa0\x80"]',  # an encoded surrogate
    b'[{"jsonrpc":"2.0","method":"daemon.ping","id":1}, "\xc3"]',
]


@pytest.mark.parametrize("body", INVALID_UTF8)
def test_invalid_utf8_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(jsonrpc.ParseError):
        jsonrpc.decode(body)
    assert jsonrpc.decode_fast([body]) is None
    assert jsonrpc.decode_fast(body + b"\n") is None
    assert jsonrpc.decode_fast([body, b'{"jsonrpc":"2.0","method":"x"}']) is None


def deep(depth: int, opener: bytes = b"[", closer: bytes = b"]", closed: bool = True) -> bytes:
    return opener * depth + (closer * depth if closed else b"")


@pytest.mark.parametrize(
    "body",
    [
        deep(129),
        deep(983),
        deep(100_000),
        deep(100_000, closed=False),
        b'{"a":' * 983 + b"1" + b"}" * 983,
        b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":' + deep(5000) + b"}",
        b'["]",' * 200 + b"1" + b"]" * 200,  # brackets in strings must not hide depth
    ],
)
def test_nesting_deeper_than_the_limit_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(jsonrpc.ParseError, match=str(jsonrpc.MAX_NESTING)):
        jsonrpc.decode(body)
    assert jsonrpc.decode_fast([body]) is None
    assert jsonrpc.decode_fast(body + b"\n") is None
    assert jsonrpc.decode_fast([body, b"{}"]) is None


def test_nesting_up_to_the_limit_is_decoded() -> None:
    assert jsonrpc.decode(deep(jsonrpc.MAX_NESTING)) is not None
    request = (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + deep(jsonrpc.MAX_NESTING - 1) + b"}"
    )
    assert jsonrpc.decode(request)["id"] == 1
    many = jsonrpc.decode_fast([request, request])
    assert many is not None and len(many) == 2


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n\u00e9', max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=3)
    ),
    max_leaves=60,
)


@settings(max_examples=fuzz_cases(100, 2000))
@given(json_values)
def test_nesting_depth_is_exact_whatever_the_strings_hold(value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False).encode()
    assert jsonrpc.nesting_depth(body) == depth_of(value)


def nest(rng: random.Random, depth: int) -> Any:
    """A JSON value exactly ``depth`` deep, with bracket-laden strings on the way."""
    if depth == 0:
        return rng.choice(["[{", "]}", '"[', "\\]", 1, None])
    inner = nest(rng, depth - 1)
    siblings = [rng.choice(["]]", "{[", 2]) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.5:
        return [*siblings, inner]
    return {"s": siblings, "k[": inner}


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_depth_check_agrees_with_the_exact_depth(seed: int) -> None:
    rng = random.Random(seed)
    depth = rng.randint(jsonrpc.MAX_NESTING - 4, jsonrpc.MAX_NESTING + 4)
    value = nest(rng, depth)
    for _ in range(rng.randint(0, 30)):  # long enough, at times, for the prefix check
        value = [value, "x" * rng.randint(0, 2000)] if rng.random() < 0.5 else value
    body = json.dumps(value).encode()
    assert jsonrpc.nesting_depth(body) == depth_of(value)
    assert jsonrpc._too_deep(body) == (depth_of(value) > jsonrpc.MAX_NESTING)


# --------------------------------------------------------------------- event history


def test_history_is_bounded_by_encoded_bytes() -> None:
    """900 KB updates used to be kept 10,000 deep: ~200 MiB for 250 of them."""
    bus = EventBus(history=10_000, history_bytes=8 << 20)
    big = "x" * 900_000
    for i in range(250):
        bus.publish(ev.TaskUpdated(task={"id": i, "description": big}, changed=[], version=i), "r")
        assert bus.history_bytes <= 8 << 20
    assert bus.history_bytes == sum(e.size for e in bus.history)
    kept = len(bus.history)
    assert 0 < kept <= 9
    sub = bus.subscribe(lambda e: True)
    events, lost = bus.replay(sub, since=0)
    assert len(events) == kept and lost == 250 - kept
    assert bus.oldest_seq == 251 - kept


def test_an_event_larger_than_the_bound_is_not_kept_and_counts_as_lost() -> None:
    bus = EventBus(history=100, history_bytes=64 << 10)
    bus.publish(ev.DebugEvent(i=1, t=0.0, pad=""), None)
    bus.publish(ev.DebugEvent(i=2, t=0.0, pad="y" * (100 << 10)), None)
    assert not bus.history and bus.history_bytes == 0
    sub = bus.subscribe(lambda e: True)
    assert bus.replay(sub, since=0) == ([], 2)
    assert bus.replay(sub, since=2) == ([], 0)


def test_the_history_keeps_the_newest_events_by_count() -> None:
    bus = EventBus(history=10)
    for i in range(50):
        bus.publish(ev.DebugEvent(i=i, t=0.0, pad=""), None)
    assert [e.seq for e in bus.history] == list(range(41, 51))


class Task(dict[str, Any]):
    """A dict that can be watched with a weak reference."""


def test_an_event_keeps_its_encoded_form_not_the_payload_objects() -> None:
    bus = EventBus()
    task = Task(id="001-a", title="T")
    ref = weakref.ref(task)
    event = bus.publish(ev.TaskUpdated(task=task, changed=["title"], version=3), "r", "001-a")
    del task
    gc.collect()
    assert ref() is None
    assert event.type == "task_updated"
    assert event.payload == {
        "task": {"id": "001-a", "title": "T"},
        "changed": ["title"],
        "version": 3,
    }
    assert json.loads(event.frame("line"))["params"]["taskId"] == "001-a"
    lsp = event.frame("lsp")
    assert lsp.startswith(b"Content-Length: %d\r\n\r\n" % (len(event.line) - 1))


# ---------------------------------------------------------------------- discover


@pytest.mark.anyio
async def test_the_discover_document_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pokeralphd.protocol import openrpc
    from pokeralphd.server import dispatch
    from pokeralphd.server.methods import build_table

    calls = []
    real = openrpc.openrpc_document

    def counting(table: Any) -> dict[str, Any]:
        calls.append(table)
        return real(table)

    monkeypatch.setattr(dispatch, "openrpc_document", counting)
    table = build_table()
    first = await table.discover_encoded()
    second = await table.discover_encoded()
    assert first is second and len(calls) == 1
    assert msgspec.json.decode(first) == real(table.methods.values())


@pytest.mark.anyio
async def test_the_first_discover_is_built_once_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading as _threading

    from pokeralphd.protocol import openrpc
    from pokeralphd.server import dispatch
    from pokeralphd.server.methods import build_table

    threads = []
    real = openrpc.openrpc_document

    def recording(table: Any) -> dict[str, Any]:
        threads.append(_threading.current_thread())
        return real(table)

    monkeypatch.setattr(dispatch, "openrpc_document", recording)
    table = build_table()
    results = []

    async def ask_for_it() -> None:
        results.append(await table.discover_encoded())

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(ask_for_it)
    assert len(threads) == 1 and threads[0] is not _threading.main_thread()
    assert len(results) == 20 and all(r is results[0] for r in results)


# ------------------------------------------------------------------------ outbox


def stream_pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
    return ours, theirs


def slow_reader(sock: socket.socket, out: bytearray, pause: float) -> threading.Thread:
    def run() -> None:
        while chunk := sock.recv(16 << 10):
            out.extend(chunk)
            time.sleep(pause)  # a slow client, not synchronisation

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.anyio
async def test_a_slow_reader_gets_the_whole_frame() -> None:
    ours, theirs = stream_pair()
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "result": "z" * (5 << 19)}).encode() + b"\n"
    got = bytearray()
    # 160 reads of at most 16 KiB, 8 ms apart: the whole send takes over 2.5 stall
    # timeouts, while each 64 KiB chunk is taken in about 32 ms, a fifteenth of one. (With
    # a 0.1 s stall timeout a loaded 2-core machine now and then left the reader thread
    # unscheduled for longer than that: same ratios, a margin a busy CI machine keeps.)
    reader = slow_reader(theirs, got, pause=0.008)
    stream = await anyio.abc.UNIXSocketStream.from_socket(ours)
    outbox = Outbox(stream, stall_timeout=0.5)
    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await outbox.send_now(frame)
        outbox.close_after_flush()
    reader.join(30)
    theirs.close()
    assert time.monotonic() - t0 > 2 * outbox.stall_timeout
    assert bytes(got) == frame and not outbox_aborted(outbox)


def outbox_aborted(outbox: Outbox) -> bool:
    return outbox.closed and outbox.pending_bytes > 0


@pytest.mark.anyio
async def test_a_reader_that_stops_is_cut_off_and_closed(caplog: pytest.LogCaptureFixture) -> None:
    ours, theirs = stream_pair()
    stream = await anyio.abc.UNIXSocketStream.from_socket(ours)
    outbox = Outbox(stream, stall_timeout=0.05, label="connection 7")
    with caplog.at_level(logging.WARNING):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            with anyio.fail_after(5):
                await outbox.send_now(b"y" * (4 << 20))
            outbox.put(b"never sent\n")
    assert outbox.closed
    assert "connection 7: the client read nothing for 0.05 s" in caplog.text
    theirs.settimeout(5)
    received = b""
    while chunk := theirs.recv(1 << 20):
        received += chunk
    assert 0 < len(received) < 4 << 20 and b"never" not in received
    theirs.close()


@pytest.mark.anyio
async def test_the_shutdown_deadline_bounds_a_shielded_send(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ours, theirs = stream_pair()
    stream = await anyio.abc.UNIXSocketStream.from_socket(ours)
    outbox = Outbox(stream, stall_timeout=5)
    t0 = anyio.current_time()
    with caplog.at_level(logging.WARNING):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.set_deadline(0.05)
            await outbox.send_now(b"y" * (4 << 20))  # shielded: only the deadline ends it
    # The deadline ended it, long before the stall timeout could have.
    assert anyio.current_time() - t0 < outbox.stall_timeout
    assert "the daemon is shutting down during a 4194304-byte write" in caplog.text
    assert outbox.closed
    theirs.close()


# ---------------------------------------------------------------- accept loop


def test_the_connection_cap_fits_the_descriptor_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = {"now": (256, 4096)}
    monkeypatch.setattr(resource, "getrlimit", lambda _which: limits["now"])
    assert connection_cap(1024, 64) == 192
    assert connection_cap(100, 64) == 100
    limits["now"] = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    assert connection_cap(1024, 64) == 1024
    limits["now"] = (20, 20)
    assert connection_cap(1024, 64) == 1


def ask(path: Path, payload: bytes, timeout: float = 5) -> list[dict[str, Any]]:
    """Send ``payload`` on a fresh connection and read lines until the peer closes."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(payload)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


@pytest.mark.anyio
async def test_a_failing_connection_ends_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    """Connections ran in the daemon's own task group: one exception ended the process."""
    path = short_tmpdir() / "a.sock"
    served = []

    async def handler(stream: anyio.abc.SocketStream) -> None:
        data = await stream.receive()
        if b"boom" in data:
            raise RuntimeError("a bug in a handler")
        served.append(data)
        await stream.send(b'{"ok":true}\n')

    listener = await anyio.create_unix_listener(path)
    acceptor = Acceptor(handler, max_connections=10, fd_reserve=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(acceptor.serve, listener, tg)
        with caplog.at_level(logging.ERROR):
            assert await anyio.to_thread.run_sync(ask, path, b"boom\n") == []
        assert await anyio.to_thread.run_sync(ask, path, b"hello\n") == [{"ok": True}]
        tg.cancel_scope.cancel()
    assert served == [b"hello\n"] and acceptor.active == 0
    assert "a client connection failed" in caplog.text and "a bug in a handler" in caplog.text


@pytest.mark.anyio
async def test_past_the_cap_a_client_is_told_by_id_and_in_its_framing() -> None:
    path = short_tmpdir() / "a.sock"
    release, holding = anyio.Event(), anyio.Event()

    async def handler(stream: anyio.abc.SocketStream) -> None:
        holding.set()
        await release.wait()

    listener = await anyio.create_unix_listener(path)
    acceptor = Acceptor(handler, max_connections=1, fd_reserve=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(acceptor.serve, listener, tg)
        holder = await anyio.connect_unix(path)
        with anyio.fail_after(5):
            await holding.wait()  # the one connection allowed is held
        assert acceptor.active == 1
        line = b'{"jsonrpc":"2.0","id":"x7","method":"daemon.ping"}\n'
        (reply,) = await anyio.to_thread.run_sync(ask, path, line)
        assert reply["id"] == "x7" and reply["error"]["code"] == -32023
        assert reply["error"]["data"]["limit"] == 1
        body = b'{"jsonrpc":"2.0","id":9,"method":"daemon.ping"}'
        lsp = b"Content-Length: %d\r\n\r\n" % len(body) + body
        raw = await anyio.to_thread.run_sync(ask_raw, path, lsp)
        head, _, rest = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: ") and json.loads(rest)["id"] == 9
        release.set()
        await holder.aclose()
        tg.cancel_scope.cancel()


def ask_raw(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        sock.sendall(payload)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


# ----------------------------------------------------------------------- settings


def test_every_limit_is_documented() -> None:
    import pokeralphd.settings as module

    doc = module.__doc__ or ""
    for name, field in DaemonSettings.model_fields.items():
        if name in ("max_concurrent_battles", "debug_methods"):
            continue
        assert field.description, f"{name} has no description"
        assert field.alias and field.alias in doc, f"{name} is missing from the table"
    defaults = DaemonSettings()
    assert (defaults.max_batch, defaults.max_reply, defaults.max_pending) == (1000, 16 << 20, 64)
    assert defaults.event_history_bytes == 32 << 20 and defaults.max_connections == 1024


def test_a_hundred_battles_can_be_configured() -> None:
    """Issue 22's hundred battles at once: the cap once stopped at 64."""
    assert (
        DaemonSettings.model_validate({"maxConcurrentBattles": 100}).max_concurrent_battles == 100
    )
    assert (
        DaemonSettings.model_validate({"maxConcurrentBattles": 256}).max_concurrent_battles == 256
    )
    with pytest.raises(ValidationError):
        DaemonSettings.model_validate({"maxConcurrentBattles": 257})
