"""The local-model coding agent (seed 001): an agent loop over a chat API with tool
calling (Ollama's ``/api/chat``, or an OpenAI-compatible ``/v1/chat/completions``), the
ten tools inside the working directory, sessions on disk, and two front-ends: the
``pokeralph-agent`` command, and Claude Code's stream-json for the daemon's ``local``
backend (:mod:`pokeralphd.agents.local`).

One module per job: :mod:`.chat` (shared client), :mod:`.ollama_chat`,
:mod:`.openai_chat`, :mod:`.transport` (their HTTP/1.1), :mod:`.toolspec` (what the
model sees), :mod:`.tools` (what they do), :mod:`.sandbox` (the boundary),
:mod:`.output` (the 10 KB cap), :mod:`.session` (the files), :mod:`.loop`,
:mod:`.streamjson`, :mod:`.approve`, :mod:`.cli`. The read-only default rules are in
:mod:`pokeralph_core.local_defaults`.
"""
