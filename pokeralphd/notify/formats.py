"""The request each webhook format sends: ``(url, headers, body)``. Pure.

- ``json``: a generic JSON POST of the message's fields (``source``, ``title``,
  ``body``, ``link``, ``kinds``, ``repo``, ``taskId``, ``deliveryId``, ``urgent``,
  ``count``; ``details`` only when the user opted in).
- ``ntfy``: ntfy's publish-as-JSON: a POST to the server's root with ``topic`` (the last
  segment of the configured topic URL), ``title``, ``message``, ``priority`` (4 when it
  needs someone, else 3), ``tags`` and ``click`` (the dashboard link). JSON rather than
  the ``Title``/``Tags`` headers: a title is UTF-8 and headers are not.
- ``slack``: an incoming webhook's ``text`` (the fallback shown in notifications) and
  ``blocks`` (a section in ``mrkdwn`` with the link as ``<url|…>``); ``&``, ``<`` and
  ``>`` escaped, so a title cannot mention ``<!channel>``.
- ``discord``: an execute-webhook's ``content`` and one embed (``title``, ``url``,
  ``description``), with ``allowed_mentions`` empty, so a title cannot ping anyone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from pokeralphd.notify.compose import Message

JSON_HEADERS = {"content-type": "application/json", "user-agent": "pokeralph"}
NTFY_TAGS = {
    "waiting": "bell",
    "escalated": "rotating_light",
    "budget": "money_with_wings",
    "failed": "x",
    "merge_failed": "warning",
    "complete": "white_check_mark",
    "cancelled": "stop_sign",
}


def _text(message: Message) -> str:
    return message.body + (f"\n\n{message.details}" if message.details else "")


def generic(message: Message) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "source": "pokeralph",
        "title": message.title,
        "body": message.body,
        "link": message.link,
        "kinds": list(message.kinds),
        "repo": message.repo,
        "taskId": message.task_id,
        "deliveryId": message.delivery_id,
        "urgent": message.urgent,
        "count": message.count,
    }
    if message.details:
        doc["details"] = message.details
    return doc


def ntfy_target(url: str) -> tuple[str, str]:
    """``https://ntfy.sh/topic?x`` -> (``https://ntfy.sh/?x``, ``topic``)."""
    parts = urlsplit(url)
    head, _, topic = parts.path.rstrip("/").rpartition("/")
    return urlunsplit(parts._replace(path=head + "/")), topic


def ntfy(message: Message, topic: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "topic": topic,
        "title": message.title,
        "message": _text(message),
        "priority": 4 if message.urgent else 3,
        "tags": [NTFY_TAGS[k] for k in message.kinds if k in NTFY_TAGS],
    }
    if message.link:
        doc["click"] = message.link
    return doc


def slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(message: Message) -> dict[str, Any]:
    text = f"*{slack_escape(message.title)}*\n{slack_escape(_text(message))}"
    if message.link:
        text += f"\n<{slack_escape(message.link)}|Open in the dashboard>"
    return {
        "text": message.title,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}],
    }


def discord(message: Message) -> dict[str, Any]:
    embed: dict[str, Any] = {
        "title": message.title[:256],
        "description": _text(message)[:4096],
        "color": 0xD0342C if message.urgent else 0x2E8B57,
    }
    if message.link:
        embed["url"] = message.link
    return {
        "content": message.title[:2000],
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }


def request_for(format_: str, url: str, message: Message) -> tuple[str, dict[str, str], bytes]:
    """Where to POST, the headers and the body, for a webhook of ``format_``."""
    if format_ == "ntfy":
        target, topic = ntfy_target(url)
        doc = ntfy(message, topic)
    elif format_ == "slack":
        target, doc = url, slack(message)
    elif format_ == "discord":
        target, doc = url, discord(message)
    else:
        target, doc = url, generic(message)
    body = json.dumps(doc, ensure_ascii=False).encode()
    return target, dict(JSON_HEADERS), body
