"""The desktop on macOS: ``osascript -e 'display notification …'``.

The script is generated here and unit-tested; AppleScript string literals escape only
``\\`` and ``"``, and a line break ends nothing inside one, so the text goes in escaped
and clipped. The link goes in the text (Notification Center opens nothing on a click of
a script's notification). One attempt: a child of its own, ended at the timeout.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import anyio

from pokeralphd.notify.channel import SEND_TIMEOUT, SendFailed

if TYPE_CHECKING:
    from pokeralphd.notify.compose import Message

TEXT_MAX = 500


def applescript_string(text: str) -> str:
    """``text`` as an AppleScript string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def script(message: Message) -> str:
    body = message.body + (f"\n{message.link}" if message.link else "")
    return (
        f"display notification {applescript_string(body[:TEXT_MAX])} "
        f"with title {applescript_string('pokeralph')} "
        f"subtitle {applescript_string(message.title[:TEXT_MAX])}"
    )


def command(message: Message) -> list[str]:
    return ["osascript", "-e", script(message)]


class OsascriptChannel:
    name = "desktop"
    kind = "desktop"

    def __init__(self, timeout: float = SEND_TIMEOUT) -> None:
        self.timeout = timeout

    async def send(self, message: Message) -> None:
        try:
            with anyio.fail_after(self.timeout):
                done = await anyio.run_process(
                    command(message), check=False, stdin=subprocess.DEVNULL
                )
        except TimeoutError as exc:
            raise SendFailed(f"osascript did not finish within {self.timeout:g}s") from exc
        except OSError as exc:
            raise SendFailed(f"could not run osascript ({exc.strerror})", retry=False) from exc
        if done.returncode != 0:
            raise SendFailed(f"osascript exited with {done.returncode}")
