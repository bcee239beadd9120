"""``pokeralphctl tui``: the terminal dashboard, one more client of the daemon's protocol.

An optional extra (``pip install 'pokeralph[tui]'``): only ``pokeralphctl tui`` imports
Textual, through :mod:`pokeralphctl.tui.app`; the other commands never load this package's
modules, so they stay on the standard library. The rooms:

- :mod:`~pokeralphctl.tui.link`: the protocol adapter, standard library only: calls on fresh
  connections, and the event stream with resume (``since``) across reconnects, run by the
  app in a worker thread that a cancel ends within a fraction of a second.
- :mod:`~pokeralphctl.tui.board`: what the screen shows, as plain data: battles across
  repositories, the inbox, spend today, each battle's recent output; events update it.
- :mod:`~pokeralphctl.tui.forms`: the answer form generated from a delivery's feedback
  schema (confirm, select, form fields, rating) and the answer it sends.
- :mod:`~pokeralphctl.tui.views`: the widgets and overlays (tables, output, status line,
  note, confirm, help).
- :mod:`~pokeralphctl.tui.app`: the Textual app: layout, keys, and the bridge between the
  blocking client's worker threads and Textual's event loop.

This module imports nothing: :mod:`pokeralphctl.commands.tui` imports it to say which extra
is missing before any of Textual is touched.
"""

from __future__ import annotations

#: The extra that brings the TUI's dependencies, and how to install it.
EXTRA = "tui"
INSTALL_HINT = "pip install 'pokeralph[tui]'"
