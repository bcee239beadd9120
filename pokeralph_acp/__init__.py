"""``pokeralph-acp``: pokeralph as an Agent Client Protocol agent, for editors.

Zed, JetBrains IDEs, Neovim (CodeCompanion, avante) and Emacs (agent-shell) start an ACP
agent as a child and speak JSON-RPC 2.0 to it over its stdin and stdout. This program is
that agent: each session is a repository, each prompt adds a task and runs its battle,
the battle streams back as ``session/update``, and what the battle asks of a person
comes up as the editor's own permission question. It is a *client* of the running
daemon's socket (started on demand as ``pokeralphctl`` starts it), never a second daemon:
everything it does is a call any other client could make.

Why a top-level package of its own, not a module of ``pokeralphctl``: it is a program
with a protocol of its own (ACP on stdio, threads for the turns), like ``pokeralph_agent``
is; ``pokeralphctl`` is the small client library and CLI that it uses, and nothing there
depends on it. Dependencies point one way: ``pokeralph_acp`` → ``pokeralphctl`` (client,
paths, autostart), never the daemon's package. Like ``pokeralphctl`` it imports the
standard library only (no asyncio, no msgspec or pydantic), which a test guards: an editor
starts it for every agent panel, and it has no more to do than relay.

Modules: :mod:`~pokeralph_acp.wire` (JSON-RPC on stdio), :mod:`~pokeralph_acp.agent`
(the ACP methods and a prompt's turn), :mod:`~pokeralph_acp.updates` (events as session
updates), :mod:`~pokeralph_acp.asks` (inbox items as permission questions),
:mod:`~pokeralph_acp.daemon` (finding, starting and registering), :mod:`~pokeralph_acp.cli`.
"""
