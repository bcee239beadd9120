"""A JSON-RPC 2.0 peer over an agent's stdio, framed as the Agent Client Protocol frames
it: one JSON object per line, both sides sending requests, responses and notifications.

Bounded in everything an agent can make it hold: a line comes from ``childlines.iter_lines``
(at most :data:`~pokeralphd.childlines.MAX_LINE` bytes; a longer one in pieces, which are
dropped whole, the agent told when it was a request of its own, our request failed when
it was the answer to one); our requests under way (:data:`MAX_PENDING`); the agent's
requests waiting for an answer (:data:`MAX_INBOUND`: more is a protocol failure, never a
queue that grows). Notifications are handed over as they arrive, synchronously.

A peer *fails* (:attr:`Peer.failure`, every waiting request raising :class:`PeerClosed`)
when the agent's output ends, or when it is not JSON-RPC at all: before the agent's first
answer, a single line that is not a JSON-RPC message ends the run (an agent that prints
its usage, a banner or another protocol is told apart at once, not waited on); later,
:data:`MAX_NOISE` such lines do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.childlines import MAX_LINE

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

MAX_PENDING = 32  # our requests under way at once
MAX_INBOUND = 64  # the agent's requests waiting for our answer
MAX_NOISE = 100  # lines that are not JSON-RPC tolerated once the agent has answered
SHOWN = 200  # characters of an odd line quoted in an error

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
INVALID_REQUEST = -32600
TOO_LARGE = -32000  # ours: a message longer than MAX_LINE, dropped unread

_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")')
_METHOD = re.compile(rb'"method"\s*:\s*"')

Json = Any  # what json.loads gives


class RpcError(Exception):
    """The agent answered one of our requests with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Json = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class PeerClosed(Exception):
    """The exchange cannot go on: the agent's output ended or is not JSON-RPC."""


@dataclass(frozen=True, slots=True)
class Incoming:
    """A request of the agent's: answer it with :meth:`Peer.respond` or :meth:`Peer.error`."""

    id: int | str
    method: str
    params: Json


@dataclass
class _Slot:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Json = None
    error: Exception | None = None


class Peer:
    """One side of the exchange: :meth:`receive` is fed every stdout line;
    :meth:`request` and :meth:`notify` write through ``send``; the agent's requests come
    out of :attr:`requests`; notifications go to ``on_notification`` as they arrive."""

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        on_notification: Callable[[str, Json], None],
        on_notice: Callable[[str], None],
    ) -> None:
        self._send = send
        self._on_notification = on_notification
        self._on_notice = on_notice
        self._pending: dict[int, _Slot] = {}
        self._next_id = 0
        self._answered = False  # the agent answered at least once (it speaks JSON-RPC)
        self._noise = 0
        self._in_long_line = False
        self.failure: str | None = None
        self.violated = False  # the exchange ended because the agent broke the protocol
        self.failed = anyio.Event()
        inbound: tuple[MemoryObjectSendStream[Incoming], MemoryObjectReceiveStream[Incoming]] = (
            anyio.create_memory_object_stream[Incoming](MAX_INBOUND)
        )
        self._inbound_send, self.requests = inbound
        self._replies: list[bytes] = []  # answers decided while reading (sent by flush)
        self._reply_ready = anyio.Event()

    # -- reading -----------------------------------------------------------------------
    def receive(self, line: bytes) -> None:
        """One stdout line or piece of one (see the module docstring); never raises."""
        if self.failure is not None:
            return
        if self._in_long_line:
            self._in_long_line = len(line) >= MAX_LINE
            return
        if len(line) >= MAX_LINE:
            self._in_long_line = True
            self._too_long(line[:4096])
            return
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._not_rpc(line)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._not_rpc(line)
            return
        self._dispatch(message)

    def close(self, why: str, *, violation: bool = False) -> None:
        """Nothing more will come: every request still waiting fails with ``why``
        (``violation``: because the agent broke the protocol, see :attr:`violated`)."""
        if self.failure is not None:
            return
        self.failure = why
        self.violated = violation
        for slot in self._pending.values():
            slot.error = PeerClosed(why)
            slot.done.set()
        self._pending.clear()
        self._inbound_send.close()
        self.failed.set()
        self._reply_ready.set()

    def finish(self) -> list[Incoming]:
        """The exchange is over: its streams are closed; the agent's requests nobody
        took up yet are returned (to be answered, or dropped)."""
        self.close("the exchange is over")
        left: list[Incoming] = []
        while True:
            try:
                left.append(self.requests.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        self.requests.close()
        return left

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        has_id = "id" in message
        msg_id = message.get("id")
        if isinstance(method, str):
            if not has_id:
                try:
                    self._on_notification(method, message.get("params"))
                except Exception as exc:  # a malformed notification is a notice
                    self._on_notice(f"malformed {method!r} notification: {exc}")
                return
            if not _valid_id(msg_id):
                self._on_notice(f"a request with an invalid id: {_shown(message)}")
                return
            assert isinstance(msg_id, int | str)
            try:
                self._inbound_send.send_nowait(Incoming(msg_id, method, message.get("params")))
            except anyio.WouldBlock:
                self.close(
                    f"the agent sent more than {MAX_INBOUND} requests without waiting for "
                    "the answers",
                    violation=True,
                )
            return
        if has_id and ("result" in message or "error" in message):
            self._answered = True
            slot = (
                self._pending.pop(msg_id, None)
                if isinstance(msg_id, int) and not isinstance(msg_id, bool)
                else None
            )
            if slot is None:
                self._on_notice(f"an answer to no request of ours: {_shown(message)}")
                return
            error = message.get("error")
            if "error" in message:
                slot.error = _rpc_error(error)
            else:
                slot.result = message.get("result")
            slot.done.set()
            return
        self._not_rpc(json.dumps(message).encode())

    def _too_long(self, head: bytes) -> None:
        """A message longer than MAX_LINE: dropped; what it was is guessed from its head."""
        found = _ID.search(head)
        msg_id: int | str | None = None
        if found:
            raw = found.group(1).decode("utf-8", "replace")
            msg_id = raw.strip('"') if raw.startswith('"') else int(raw)
        text = f"a message longer than {MAX_LINE >> 20} MiB was dropped"
        if msg_id is not None and _METHOD.search(head):
            self._reply(_error_line(msg_id, TOO_LARGE, text))
        elif isinstance(msg_id, int) and msg_id in self._pending:
            slot = self._pending.pop(msg_id)
            slot.error = RpcError(TOO_LARGE, f"the agent's answer was too long: {text}")
            slot.done.set()
        self._on_notice(text)

    def _not_rpc(self, line: bytes) -> None:
        shown = line[:SHOWN].decode("utf-8", "replace")
        if not self._answered:
            self.close(
                f"the agent does not speak the Agent Client Protocol on stdout: {shown!r}",
                violation=True,
            )
            return
        self._noise += 1
        self._on_notice(f"not JSON-RPC: {shown}")
        if self._noise >= MAX_NOISE:
            self.close(f"the agent printed {MAX_NOISE} lines that are not JSON-RPC", violation=True)

    # -- writing -----------------------------------------------------------------------
    async def request(self, method: str, params: Json) -> Json:
        """Send a request and wait for its answer: the result, or :class:`RpcError`, or
        :class:`PeerClosed` when the exchange ends first."""
        if self.failure is not None:
            raise PeerClosed(self.failure)
        if len(self._pending) >= MAX_PENDING:
            raise PeerClosed(f"more than {MAX_PENDING} requests to the agent under way")
        self._next_id += 1
        msg_id = self._next_id
        slot = _Slot()
        self._pending[msg_id] = slot
        try:
            await self._send(
                _line({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
            )
            await slot.done.wait()
        finally:
            self._pending.pop(msg_id, None)
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def notify(self, method: str, params: Json) -> None:
        await self._send(_line({"jsonrpc": "2.0", "method": method, "params": params}))

    async def respond(self, msg_id: int | str, result: Json) -> None:
        await self._send(_line({"jsonrpc": "2.0", "id": msg_id, "result": result}))

    async def error(self, msg_id: int | str, code: int, message: str) -> None:
        await self._send(_error_line(msg_id, code, message))

    def _reply(self, data: bytes) -> None:
        if len(self._replies) < MAX_INBOUND:
            self._replies.append(data)
            self._reply_ready.set()

    async def flush_replies(self) -> None:
        """Send the answers decided while reading (to messages dropped as too long),
        until the exchange ends."""
        while self.failure is None:
            await self._reply_ready.wait()
            self._reply_ready = anyio.Event()
            replies, self._replies = self._replies, []
            for data in replies:
                await self._send(data)


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and len(value) <= 200
    )


def _rpc_error(error: Any) -> RpcError:
    if not isinstance(error, dict):
        return RpcError(INTERNAL_ERROR, str(error)[:SHOWN])
    code = error.get("code")
    message = error.get("message")
    return RpcError(
        code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
        message[:2000] if isinstance(message, str) else "error",
        error.get("data"),
    )


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


def _error_line(msg_id: int | str, code: int, message: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def _shown(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)[:SHOWN]
