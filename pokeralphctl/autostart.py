"""Starting a detached daemon on demand, the way watchman does, so a first command works.

Only when no daemon answers, no service manager unit is installed (then the service
manager owns the daemon: `systemctl --user start pokeralphd.socket`), the command is not
a diagnostic one (``ping``, ``status``, ``daemon``, ``service``: they report the truth),
and neither ``--no-autostart`` nor ``POKERALPH_NO_AUTOSTART=1`` opts out.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pokeralphctl.commands import Context

NO_AUTOSTART_ENV = "POKERALPH_NO_AUTOSTART"
DIAGNOSTIC = frozenset({"ping", "status", "daemon", "service", "completion"})


def allowed(ctx: Context, args: object) -> bool:
    if getattr(args, "no_autostart", False) or ctx.term.env.get(NO_AUTOSTART_ENV, "") not in (
        "",
        "0",
    ):
        return False
    if getattr(args, "command", None) in DIAGNOSTIC:
        return False
    from pokeralphctl.service import installed_units

    return not installed_units(ctx.term)


def start(ctx: Context) -> bool:
    """Start ``pokeralphd`` detached and wait until it answers; False if it did not."""
    from pokeralphctl.commands import daemon

    log = daemon.log_file(ctx.term)
    pid = daemon.spawn(daemon.daemon_command(ctx.socket()), log, ctx.term.env)
    deadline = time.monotonic() + daemon.START_DEADLINE
    delay = 0.01
    while not daemon.ping(ctx):
        if daemon.exited(pid) is not None or time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    ctx.term.stderr.write(
        f"pokeralphctl: started pokeralphd in the background (pid {pid}, log {log}); "
        "`pokeralphctl service install` makes it a service\n"
    )
    return True
