"""Links straight to an item in the dashboard: ``{base}#/battle/{repo}/{task}`` or
``{base}#/inbox/{repo}/{item}`` (the page's own routes, ``web/static/js/app.js``).

A link names the item and nothing else: never a login secret. A browser with a
session opens the item; one without is told to run ``pokeralphctl web``.
"""

from __future__ import annotations

from urllib.parse import quote


def item_link(
    base: str | None, repo: str, task_id: str | None = None, delivery_id: str | None = None
) -> str | None:
    """The dashboard's link to a delivery (preferred: it waits for an answer) or a
    battle; ``None`` without a dashboard."""
    if not base:
        return None
    base = base if base.endswith("/") else base + "/"
    if delivery_id is not None:
        view, item = "inbox", delivery_id
    elif task_id is not None:
        view, item = "battle", task_id
    else:
        view, item = "dashboard", None
    parts = [view, repo] + ([item] if item is not None else [])
    return base + "#/" + "/".join(quote(part, safe="") for part in parts)
