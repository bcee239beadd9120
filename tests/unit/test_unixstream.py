"""Unix-socket streams on transports (pokeralphd.unixstream): a receive cancelled in the
same turn of the loop in which its socket became readable leaves nothing behind.

On anyio's raw-socket Unix streams it leaves an ``InvalidStateError`` in the loop's
exception handler every time (the reader runs ``set_result`` on the cancelled future);
the first test shows that, so that the day anyio fixes it, this module can go.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import anyio
import anyio.abc
import pytest

from pokeralphd import unixstream

pytestmark = pytest.mark.anyio


async def _cancel_as_data_arrives(stream: anyio.abc.ByteStream, peer: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    async with anyio.create_task_group() as tg:

        async def reader(*, task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
            with anyio.CancelScope() as scope:
                task_status.started(scope)
                await stream.receive()

        scope = await tg.start(reader)
        await anyio.wait_all_tasks_blocked()
        peer.send(b"x")  # readable at the next poll...
        loop.call_soon(scope.cancel)  # ...and the cancel runs first in that turn


async def _errors_of(wrap: Any, rounds: int = 50) -> list[Any]:
    loop = asyncio.get_running_loop()
    errors: list[Any] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx.get("exception")))
    try:
        for _ in range(rounds):
            ours, peer = socket.socketpair()
            stream = await wrap(ours)
            await _cancel_as_data_arrives(stream, peer)
            await stream.aclose()
            peer.close()
    finally:
        loop.set_exception_handler(None)
    return errors


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_anyios_raw_unix_streams_leave_an_error_behind() -> None:
    errors = await _errors_of(anyio.abc.UNIXSocketStream.from_socket)
    assert errors and all(isinstance(e, asyncio.InvalidStateError) for e in errors)


async def test_streams_on_a_transport_leave_nothing() -> None:
    async def wrap(sock: socket.socket) -> anyio.abc.ByteStream:
        return await unixstream.on_transport(await anyio.abc.UNIXSocketStream.from_socket(sock))

    assert await _errors_of(wrap) == []


async def test_a_stream_on_a_transport_still_talks(tmp_path: Any) -> None:
    path = tmp_path / "s.sock"
    listener = await anyio.create_unix_listener(path)
    async with listener, anyio.create_task_group() as tg:

        async def serve() -> None:
            raw = await listener.accept()
            served = await unixstream.on_transport(raw)
            async with served:
                await served.send(await served.receive() + b" back")

        tg.start_soon(serve)
        async with await unixstream.connect(path) as client:
            await client.send(b"ping")
            assert await client.receive() == b"ping back"
