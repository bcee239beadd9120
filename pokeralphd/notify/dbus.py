"""The desktop on Linux: the freedesktop notification service over the D-Bus session
bus, with jeepney.

jeepney, not dbus-next/dbus-fast or dbus-python: pure Python with no dependencies (no
libdbus to build against, no C extension), small enough to read, and kept up by the
maintainer of ``secretstorage``/``keyring``, which most Linux desktops' Python already
carries. One call, ``org.freedesktop.Notifications.Notify``, needs nothing more. It runs
blocking, in a worker thread, bounded by a timeout, so the daemon's loop never waits on
the bus; the bus is found as the session's (``DBUS_SESSION_BUS_ADDRESS``) at each send.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.notify.channel import SEND_TIMEOUT, SendFailed

if TYPE_CHECKING:
    from pokeralphd.notify.compose import Message

BUS_NAME = "org.freedesktop.Notifications"
OBJECT_PATH = "/org/freedesktop/Notifications"
APP_NAME = "pokeralph"
SIGNATURE = "susssasa{sv}i"


def notify_args(message: Message) -> tuple[Any, ...]:
    """The arguments of ``Notify``: app name, replaces id, icon, summary, body,
    actions, hints, expiry (-1: the server's default)."""
    body = message.body
    if message.details:
        body += "\n\n" + message.details
    if message.link:
        body += "\n" + message.link
    hints = {
        "urgency": ("y", 2 if message.urgent else 1),
        "category": ("s", "x-pokeralph." + message.kinds[0] if message.kinds else "x-pokeralph"),
        "desktop-entry": ("s", APP_NAME),
    }
    return (APP_NAME, 0, "", message.title, body, [], hints, -1)


def _send_blocking(args: tuple[Any, ...], address: str, timeout: float) -> int:
    from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    target = DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=BUS_NAME)
    call = new_method_call(target, "Notify", SIGNATURE, args)
    with open_dbus_connection(bus=address, auth_timeout=timeout) as conn:
        reply = conn.send_and_get_reply(call, timeout=timeout)
    if reply.header.message_type == MessageType.error:
        name = reply.header.fields.get(HeaderFields.error_name, "an error")
        raise SendFailed(f"the notification service answered {name}")
    return int(reply.body[0])


class FreedesktopChannel:
    name = "desktop"
    kind = "desktop"

    def __init__(self, address: str | None = None, timeout: float = SEND_TIMEOUT) -> None:
        self.address = address
        self.timeout = timeout

    async def send(self, message: Message) -> None:
        address = self.address or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
        if not address:
            raise SendFailed(
                "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)", retry=False
            )
        args = notify_args(message)
        try:
            await anyio.to_thread.run_sync(
                _send_blocking, args, address, self.timeout, abandon_on_cancel=True
            )
        except SendFailed:
            raise
        except TimeoutError as exc:
            raise SendFailed(
                f"the notification service did not answer within {self.timeout:g}s"
            ) from exc
        except (OSError, ValueError, KeyError) as exc:
            raise SendFailed(
                f"could not reach the D-Bus session bus ({type(exc).__name__}: {exc})"
            ) from exc
