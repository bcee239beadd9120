"""``pokeralph-acp``: serve ACP on stdin and stdout until stdin ends.

Started by an editor, with no arguments (``--help`` and ``--version`` for people). The
socket is found as ``pokeralphctl`` finds it; ``POKERALPH_SOCKET`` points elsewhere.
Diagnostics go to stderr: stdout carries the protocol only.
"""

from __future__ import annotations

import os
import sys

from pokeralph_acp.agent import Agent
from pokeralph_acp.daemon import Daemon
from pokeralph_acp.wire import Peer
from pokeralphctl import __version__

#: How long a ``session/new`` under way when stdin ends may still take to answer.
DRAIN_SECONDS = 15.0
USAGE = """usage: pokeralph-acp

pokeralph as an Agent Client Protocol agent: an editor (Zed, JetBrains, Neovim, Emacs)
starts it and speaks ACP over its stdin and stdout. Each prompt adds a task to the
session's repository and runs its battle on the running pokeralphd (started if needed).
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if args == ["--version"]:
        sys.stdout.write(f"pokeralph-acp {__version__}\n")
        return 0
    if args:
        sys.stderr.write(USAGE)
        return 2
    peer = Peer(sys.stdin.buffer, sys.stdout.buffer)
    agent = Agent(peer, Daemon(os.environ))
    try:
        peer.serve(agent.on_message)
        agent.drain(DRAIN_SECONDS)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
