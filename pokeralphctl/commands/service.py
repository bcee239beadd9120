"""``pokeralphctl service install|uninstall|status``: pokeralphd under systemd or launchd."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from pokeralphctl.client import DaemonNotRunning
from pokeralphctl.commands import CommandError

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_service(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["install", "uninstall", "status"])
    parser.add_argument(
        "--no-socket", action="store_true", help="no socket activation: install the service alone"
    )
    parser.add_argument("--force", action="store_true", help="replace unit files that differ")
    parser.add_argument("--enable", action="store_true", help="also run the enable command")
    parser.set_defaults(handler=service)


def service(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl service ACTION``."""
    from pokeralphctl import service as svc

    out = ctx.out
    try:
        if args.action == "install":
            written = svc.install(ctx.term, socket=not args.no_socket, force=args.force)
            command = svc.enable_command(ctx.term, socket=not args.no_socket)
            result: dict[str, Any] = {"installed": [str(p) for p in written], "enable": command}
            if args.enable:
                subprocess.run(command, shell=True, check=True, env=ctx.term.env, cwd=ctx.term.cwd)
            if out.json:
                out.ok(result)
            else:
                for path in written:
                    out.line(f"wrote {path}")
                out.line(f"{'enabled with' if args.enable else 'enable it with'}: {command}")
            return 0
        if args.action == "uninstall":
            removed = svc.uninstall(ctx.term)
            result = {"removed": [str(p) for p in removed], "disable": svc.disable_command()}
            if out.json:
                out.ok(result)
            else:
                for path in removed:
                    out.line(f"removed {path}")
                out.line(
                    f"disable what runs with: {result['disable']}"
                    if removed
                    else "nothing was installed"
                )
            return 0
    except svc.ServiceError as exc:
        raise CommandError(str(exc)) from exc
    except subprocess.CalledProcessError as exc:
        raise CommandError(
            f"`{exc.cmd}` failed with status {exc.returncode}", "run it by hand to see why"
        ) from exc
    answering = True
    try:
        with ctx.connect(5) as conn:
            conn.call("daemon.ping")
    except DaemonNotRunning:
        answering = False
    installed = [str(p) for p in svc.installed_units(ctx.term)]
    status: dict[str, Any] = {
        "installed": installed,
        "answering": answering,
        "enable": svc.enable_command(ctx.term),
    }
    if out.json:
        out.ok(status)
    else:
        out.line(
            "installed: "
            + (", ".join(status["installed"]) or "nothing (`pokeralphctl service install`)")
        )
        out.line(f"daemon answering: {'yes' if answering else 'no'}")
    return 0
