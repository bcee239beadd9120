"""What the daemon, its client, the local agent and the ACP adapter share: the one place
each of them learns where things live and what a shared document or rule means.

Nobody here imports :mod:`pokeralphd`, :mod:`pokeralphctl`, :mod:`pokeralph_agent` or
:mod:`pokeralph_acp` (tests/unit/test_architecture.py); they import this. Two kinds of
module, kept apart because the client loads the first kind on every start:

- **Standard library only**: :mod:`.paths` (where the daemon's socket is) and
  :mod:`.weblink` (the dashboard's link files and login MACs). ``pokeralphctl`` imports
  these and nothing else of the core (tests/cli/test_imports.py).
- **The shared models and files** (pydantic, regex): :mod:`.userdirs` (the user's state
  and config folders), :mod:`.errors` (the error base, the file errors and
  ``InvalidParams``), :mod:`.timeutil`, :mod:`.model_base`, :mod:`.approval` (rules and
  their matching), :mod:`.input_view`, :mod:`.local_config` (``agent.local``),
  :mod:`.local_defaults` (the local agent's default rules), :mod:`.safefs`,
  :mod:`.atomic` and :mod:`.documents` (atomic, versioned documents), and the
  :mod:`.config` package (the ``Config`` model and reading its layers, trust included:
  the daemon and the standalone local agent read the config the same way; writing the
  layers is the daemon's).

This ``__init__`` imports nothing, so ``import pokeralph_core.paths`` stays cheap.
"""
