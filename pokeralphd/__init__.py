"""pokeralphd: the per-user daemon that runs coding agents in Ralph loops.

The daemon owns one runtime per registered repository and speaks JSON-RPC 2.0
over a Unix socket. See ``pokeralphd.daemon`` for the wiring.
"""

__version__ = "0.1.0"
