"""The systemd notify protocol, written directly: datagrams to ``$NOTIFY_SOCKET``.

``READY=1`` once the daemon serves, ``STATUS=`` one-line summaries, ``STOPPING=1`` on
shutdown, ``WATCHDOG=1`` every half ``WATCHDOG_USEC`` when the service manager asks for
it. Without ``NOTIFY_SOCKET`` every call is a no-op; a failed send is logged, never raised.
The variables are removed from the environment so agents do not inherit them.
"""

from __future__ import annotations

import logging
import os
import socket

import anyio

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, address: str | None, watchdog_usec: int | None) -> None:
        self.address = address
        self.watchdog_usec = watchdog_usec

    @classmethod
    def from_env(cls) -> Notifier:
        address = os.environ.pop("NOTIFY_SOCKET", None) or None
        usec = os.environ.pop("WATCHDOG_USEC", None)
        pid = os.environ.pop("WATCHDOG_PID", None)
        watchdog = None
        if usec and usec.isdigit() and (not pid or pid == str(os.getpid())):
            watchdog = int(usec)
        return cls(address, watchdog)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, message: str) -> bool:
        if not self.address:
            return False
        target = self.address
        if target.startswith("@"):
            target = "\0" + target[1:]  # abstract namespace
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(target)
                sock.sendall(message.encode())
        except OSError as exc:
            log.debug("sd_notify to %s failed: %s", self.address, exc)
            return False
        return True

    def ready(self, status: str) -> None:
        self.send(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def stopping(self) -> None:
        self.send("STOPPING=1\nSTATUS=stopping")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        return self.watchdog_usec / 2_000_000 if self.watchdog_usec else None

    async def watchdog_loop(self) -> None:
        """Ping the watchdog at half its period, for as long as the event loop runs."""
        interval = self.watchdog_interval()
        if interval is None or not self.enabled:
            return
        while True:
            self.watchdog()
            await anyio.sleep(interval)
