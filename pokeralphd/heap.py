"""The daemon process's garbage collector, set for a long-running server.

Called once the daemon is ready, in the daemon's own process only (``pokeralphd``; never
where a test or an embedding program runs it in its own process, whose heap is not
ours to freeze):

- everything made to start (modules, models and their schemas, the web app) is frozen
  (:func:`gc.freeze`): it lives as long as the daemon, so a full collection under load
  scans what battles made, not all of it;
- a young collection waits for 10,000 new container objects, not 700: the daemon makes
  thousands a second while it streams, and most are gone by then, so fewer survive into
  the older generations whose collections stop the loop longest.

In the flood benchmark (100 battles streaming) full collections took up to 112 ms each,
every one a late line for every subscriber; with these, at most 63 to 89 ms, and fewer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Freeze what starting made and widen the young generation (see the module doc)."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
