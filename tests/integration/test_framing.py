"""Both framings on one socket, large messages, and the size limit."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pokeralphd.protocol.framing import FrameDecoder, FrameTooLarge, encode_frame
from tests.helpers import DaemonProcess, fuzz_cases, read_messages


def lsp(body: dict[str, Any] | bytes) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n" % len(raw) + raw


def read_lsp(sock: socket.socket, count: int) -> list[Any]:
    buf = b""
    out: list[Any] = []
    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        length = int(head.split(b":")[1])
        while len(buf) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
        out.append(json.loads(buf[:length]))
        buf = buf[length:]
    return out


def test_lsp_framing_is_detected_and_used_for_replies(daemon: DaemonProcess) -> None:
    with daemon.raw() as sock:
        # Split the header across sends, as a stream may.
        frame = lsp({"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"})
        sock.sendall(frame[:3])
        sock.sendall(frame[3:20])
        sock.sendall(frame[20:] + lsp({"jsonrpc": "2.0", "id": 2, "method": "daemon.status"}))
        first, second = read_lsp(sock, 2)
    assert first["result"] == "pong" and second["result"]["pid"] > 0


def test_lsp_with_content_type_header(daemon: DaemonProcess) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"}).encode()
    with daemon.raw() as sock:
        sock.sendall(
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n"
            % len(body)
            + body
        )
        assert read_lsp(sock, 1)[0]["result"] == "pong"


def test_large_messages_both_framings(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    description = "x" * 600_000  # well past the 64 KiB default of many stream readers
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "task.create",
        "params": {
            "title": "Big",
            "description": description,
            "acceptanceCriteria": ["c"],
            "repo": str(repo),
        },
    }
    with daemon.raw() as sock:
        sock.sendall(json.dumps(request).encode() + b"\n")
        reply = read_messages(sock, 1)[0]
    assert len(reply["result"]["task"]["description"]) == 600_000
    with daemon.raw() as sock:
        sock.sendall(
            lsp(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "task.get",
                    "params": {"taskId": "001-big", "repo": str(repo)},
                }
            )
        )
        assert len(read_lsp(sock, 1)[0]["result"]["task"]["description"]) == 600_000


def test_oversized_message_is_refused_and_the_daemon_goes_on(daemon: DaemonProcess) -> None:
    payload = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "daemon.ping", "params": {"x": "'
        + b"y" * (1 << 20)
        + b'"}}\n'
    )
    with daemon.raw() as sock:
        try:
            sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may close before reading it all
        reply = read_messages(sock, 1)[0]
        assert reply["error"]["code"] == -32011 and reply["id"] is None
        assert reply["error"]["data"]["limit"] == 1 << 20
        assert sock.recv(1) == b""  # closed
    with daemon.raw() as sock:
        sock.sendall(b"Content-Length: 99999999\r\n\r\n")
        assert read_lsp(sock, 1)[0]["error"]["code"] == -32011
    assert daemon.call("daemon.ping") == "pong"


def test_pipelined_requests_on_one_connection(daemon: DaemonProcess) -> None:
    with daemon.raw() as sock:
        sock.sendall(
            b"".join(
                json.dumps({"jsonrpc": "2.0", "id": i, "method": "daemon.ping"}).encode() + b"\n"
                for i in range(2000)
            )
        )
        replies = read_messages(sock, 2000)
    assert [r["id"] for r in replies] == list(range(2000))


@settings(max_examples=fuzz_cases(100, 2000))
@given(
    st.lists(
        st.binary(min_size=1, max_size=300).filter(lambda b: b"\n" not in b and b.strip()),
        max_size=10,
    ),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=5),
)
def test_line_decoder_reassembles_any_split(messages: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(m + b"\n" for m in messages)
    decoder = FrameDecoder(max_message=4096)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += decoder.feed(stream[pos : pos + step])
        pos += step
        i += 1
    expected = [m.strip() for m in messages]
    if expected and expected[0][:1].lower() == b"c" and b"content-" in expected[0][:16].lower():
        return  # that stream legitimately looks like LSP framing
    assert out == expected


@given(st.lists(st.binary(max_size=500), max_size=8), st.integers(min_value=1, max_value=64))
def test_lsp_decoder_reassembles_any_split(bodies: list[bytes], step: int) -> None:
    stream = b"".join(encode_frame(b, "lsp") for b in bodies)
    decoder = FrameDecoder(max_message=4096)
    out: list[bytes] = []
    for pos in range(0, len(stream), step):
        out += decoder.feed(stream[pos : pos + step])
    assert out == bodies


def test_decoder_limits() -> None:
    decoder = FrameDecoder(max_message=10)
    try:
        decoder.feed(b"x" * 11)
    except FrameTooLarge as exc:
        assert exc.limit == 10
    else:
        raise AssertionError("no error")
