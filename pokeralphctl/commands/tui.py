"""``pokeralphctl tui``: the terminal dashboard (:mod:`pokeralphctl.tui`).

Thin: it checks that the optional extra is installed (naming it when it is not) and that
a person is at a terminal, then runs the app. Textual is imported here, by this command
only, so every other command stays on the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphctl.commands import CommandError
from pokeralphctl.tui import EXTRA, INSTALL_HINT

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context

#: The distributions the extra brings; a missing one of these means the extra is missing.
NEEDS = frozenset({"textual", "rich"})


def add_tui(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=tui)


def tui(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl tui``."""
    try:
        from pokeralphctl.tui.app import run
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in NEEDS:
            raise
        raise CommandError(
            f"the terminal dashboard needs the optional extra `{EXTRA}` "
            f"({exc.name} is not installed): {INSTALL_HINT}",
            "then run `pokeralphctl tui` again",
            data={"extra": EXTRA, "missing": exc.name},
        ) from None
    if ctx.out.json or not ctx.term.interactive():
        raise CommandError(
            "the terminal dashboard needs a terminal (and has no --json)",
            "for scripts: `pokeralphctl watch --json`, `battle show --json`, `inbox --json`",
            code="usage",
        )
    return run(ctx.socket(), ctx.term.env)
