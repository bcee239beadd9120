"""What the notification tests send to: a private D-Bus session bus (Debian's
``dbus-daemon``) with a fake notification server on it, and local HTTP servers standing
in for the webhook services. Each records what it received; tests wait for that with a
deadline, never a sleep."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class Recorder:
    """Things received, and a way to wait until there are ``n``."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._cond = threading.Condition()

    def add(self, item: Any) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def _wait(self, n: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.items) >= n, timeout)

    async def wait_for(self, n: int, timeout: float = 20) -> list[Any]:
        ok = await anyio.to_thread.run_sync(self._wait, n, timeout)
        assert ok, f"expected {n} received, got {len(self.items)}: {self.items}"
        return list(self.items)


@contextlib.contextmanager
def session_bus(folder: Path) -> Iterator[str]:
    """A private session bus: its address. Skips without ``dbus-daemon``."""
    import pytest

    exe = shutil.which("dbus-daemon")
    if exe is None:
        pytest.skip("dbus-daemon is not installed (Debian: apt-get install dbus-daemon)")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "bus.conf"
    config.write_text(BUS_CONFIG.format(dir=folder))
    proc = subprocess.Popen(
        [exe, f"--config-file={config}", "--print-address", "--nofork"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address.startswith("unix:"), address
        yield address
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


class NotificationServer:
    """Owns ``org.freedesktop.Notifications`` on the bus and records each ``Notify``
    call's arguments (a jeepney connection in a thread of its own)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.calls = Recorder()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> NotificationServer:
        self._thread.start()
        assert self._ready.wait(10), "the fake notification server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _serve(self) -> None:
        from jeepney import MessageType, new_method_return
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus=self.address) as conn:
            reply = conn.send_and_get_reply(
                message_bus.RequestName("org.freedesktop.Notifications")
            )
            assert reply.body == (1,), reply.body  # the primary owner
            self._ready.set()
            serial = 0
            while not self._stop.is_set():
                try:
                    msg = conn.receive(timeout=0.1)
                except TimeoutError:
                    continue
                header = msg.header
                if header.message_type != MessageType.method_call:
                    continue
                from jeepney import HeaderFields

                member = header.fields.get(HeaderFields.member)
                if member == "Notify":
                    serial += 1
                    self.calls.add(msg.body)
                    conn.send(new_method_return(msg, "u", (serial,)))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookServer:
    """A local HTTP server standing in for a webhook service: records each POST and
    answers the next of ``statuses`` (the last one repeats)."""

    def __init__(self, statuses: tuple[int, ...] = (200,)) -> None:
        self.requests = Recorder()
        self.statuses = list(statuses)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                server.requests.add(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status = server.statuses.pop(0) if len(server.statuses) > 1 else server.statuses[0]
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> WebhookServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
