"""Notifications end to end: a real daemon (in this process, with its dashboard), a demo
battle, a private D-Bus session bus with a fake notification server on it, and local
HTTP servers standing in for each webhook service, checked for its real request format.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest

from pokeralphctl.commands.demo import TASK_ID, agent_config, make_sample
from pokeralphd.notify.outbox import Limits
from pokeralphd.protocol.events import check_event
from tests.inproc import InProcDaemon, RpcError, running_daemon
from tests.notify.fakes import NotificationServer, WebhookServer, session_bus

if TYPE_CHECKING:
    from pokeralphctl.terminal import Terminal

pytestmark = pytest.mark.anyio
FAST = Limits(window=0.3, backoff=0.05)
SECRET = "/hooks/T000/B000/s3cr3t-token"


@pytest.fixture
async def d(home: Path) -> AsyncIterator[InProcDaemon]:
    async with running_daemon(home / "h", web=True) as daemon:
        # seconds of coalescing and backoff, not the defaults' (the unit tests move a
        # clock through those)
        daemon.daemon.notify.limits = FAST
        daemon.daemon.notify.coalescer.window = FAST.window
        yield daemon


async def _demo(d: InProcDaemon, target: Path) -> str:
    """The quickstart's sample (what ``pokeralphctl demo`` makes), registered for the
    demo agent in YOLO mode: its task's id."""
    term = cast("Terminal", SimpleNamespace(env=dict(os.environ)))
    prd = make_sample(term, target)
    await d.call("repo.register", {"path": str(target)})
    await d.call("prd.update", {"repo": str(target), "prd": prd})
    patch = {
        "agent": agent_config(0),
        "mode": "yolo",
        "maxIterationsPerTask": 5,
        "feedbackLoops": ["test"],
        "feedbackCommands": {"test": f"{sys.executable} -m unittest -q"},
    }
    await d.call("config.update", {"repo": str(target), "patch": patch})
    return TASK_ID


def _hooks(servers: dict[str, WebhookServer]) -> list[dict[str, Any]]:
    return [
        {"url": server.url(f"/{fmt}{SECRET}"), "format": fmt, "name": fmt}
        for fmt, server in servers.items()
    ]


async def test_a_battle_completing_notifies_each_channel_once_with_its_link(
    d: InProcDaemon, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        session_bus(home / "bus") as address,
        NotificationServer(address) as desktop,
        WebhookServer() as generic,
        WebhookServer() as ntfy,
        WebhookServer() as slack,
        WebhookServer() as discord,
    ):
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        servers = {"json": generic, "ntfy": ntfy, "slack": slack, "discord": discord}
        await d.call(
            "config.updateUser",
            {"patch": {"notify": {"desktop": True, "webhooks": _hooks(servers)}}},
        )
        task = await _demo(d, home / "sample")
        repo = home / "sample"
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"repo": str(repo)})
            await d.call("battle.start", {"repo": str(repo), "taskId": task})
            ends = await watcher.events_until({"battle_complete", "battle_failed"})
        assert ends[-1]["type"] == "battle_complete"
        web = d.daemon.web
        assert web is not None and web.url is not None
        link = f"{web.url}#/battle/sample/{task}"

        [call] = await desktop.calls.wait_for(1)
        app, replaces, _icon, summary, body, actions, hints, expiry = call
        assert (app, replaces, actions, expiry) == ("pokeralph", 0, [], -1)
        assert summary == f"pokeralph · sample · {task}: complete"
        assert body.startswith("complete after ") and body.endswith(link)
        assert hints["urgency"] == ("y", 1)

        [sent] = await generic.requests.wait_for(1)
        assert sent.path == f"/json{SECRET}"
        assert sent.headers["content-type"] == "application/json"
        doc = sent.json()
        assert doc["title"] == summary and doc["link"] == link and doc["kinds"] == ["complete"]
        assert (doc["repo"], doc["taskId"], doc["source"]) == ("sample", task, "pokeralph")
        assert "details" not in doc  # titles and links only unless opted in

        [sent] = await ntfy.requests.wait_for(1)
        # ntfy's publish-as-JSON: to the server's root, the topic in the body
        assert sent.path == "/ntfy/hooks/T000/B000/"
        doc = sent.json()
        assert doc["topic"] == "s3cr3t-token" and doc["title"] == summary
        assert doc["click"] == link and doc["priority"] == 3
        assert doc["tags"] == ["white_check_mark"] and doc["message"].startswith("complete")

        [sent] = await slack.requests.wait_for(1)
        assert sent.path == f"/slack{SECRET}"
        doc = sent.json()
        assert doc["text"] == summary
        [block] = doc["blocks"]
        assert block["type"] == "section" and block["text"]["type"] == "mrkdwn"
        assert f"<{link}|Open in the dashboard>" in block["text"]["text"]

        [sent] = await discord.requests.wait_for(1)
        doc = sent.json()
        assert doc["content"] == summary and doc["allowed_mentions"] == {"parse": []}
        [embed] = doc["embeds"]
        assert embed["title"] == summary and embed["url"] == link

        # one each: nothing else was coming (the bus holds every event; the outboxes are idle)
        for server in servers.values():
            assert len(server.requests.items) == 1
        assert len(desktop.calls.items) == 1


async def test_an_item_waiting_for_an_answer_notifies_once(d: InProcDaemon, repo: Path) -> None:
    with WebhookServer() as generic:
        hooks = [{"url": generic.url("/w"), "format": "json"}]
        await d.call("config.updateUser", {"patch": {"notify": {"webhooks": hooks}}})
        await d.call("repo.register", {"path": str(repo)})
        await d.call("inbox.create", {"repo": str(repo), "title": "FYI", "mode": "passive"})
        created = await d.call(
            "inbox.create",
            {
                "repo": str(repo),
                "title": "Ship it?",
                "body": "secret diff",
                "schema": {"type": "confirm"},
            },
        )
        item = created["delivery"]["id"]
        [sent] = await generic.requests.wait_for(1)
        doc = sent.json()
        assert doc["kinds"] == ["waiting"] and doc["deliveryId"] == item
        assert doc["body"] == "waiting for you: Ship it?"
        assert doc["link"].endswith(f"#/inbox/repo/{item}")
        assert "secret diff" not in sent.body.decode()


async def test_a_failing_webhook_is_retried_then_given_up_and_its_url_never_shows(
    d: InProcDaemon, repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with WebhookServer(statuses=(500,)) as failing:
        url = failing.url(SECRET)
        hooks = [{"url": url, "format": "slack", "name": "team"}]
        updated = await d.call("config.updateUser", {"patch": {"notify": {"webhooks": hooks}}})
        assert url not in json.dumps(updated)
        assert updated["layer"]["notify"]["webhooks"][0]["url"] == ("<secret: http://127.0.0.1/…>")
        await d.call("repo.register", {"path": str(repo)})
        async with d.client() as watcher:
            await watcher.call("events.subscribe", {"types": ["notify_failed"]})
            await d.call(
                "inbox.create",
                {"repo": str(repo), "title": "Ship it?", "schema": {"type": "confirm"}},
            )
            failed = await watcher.events_until({"notify_failed"})
        check_event(failed[-1])
        payload = failed[-1]["payload"]
        assert payload["channel"] == "team" and payload["format"] == "slack"
        assert (
            payload["attempts"] == FAST.attempts
            and payload["error"] == "the webhook answered HTTP 500"
        )
        assert len(failing.requests.items) == FAST.attempts
        shown = json.dumps(await d.call("config.get", {"repo": str(repo)}))
        shown += json.dumps(await d.call("config.getUser"))
        history = b"".join(event.line for event in d.daemon.bus.history).decode()
        logs = "\n".join(record.getMessage() for record in caplog.records)
        for text in (shown, history, logs):
            assert SECRET not in text and "s3cr3t" not in text
        assert "team" in logs  # the give-up was logged, by the channel's name


async def test_notify_test_sends_one_on_the_channel_named(d: InProcDaemon) -> None:
    with WebhookServer() as one, WebhookServer() as two:
        hooks = [
            {"url": one.url("/a"), "format": "discord", "name": "one"},
            {"url": two.url("/b"), "format": "json"},
        ]
        await d.call("config.updateUser", {"patch": {"notify": {"webhooks": hooks}}})
        result = await d.call("notify.test", {"channel": "webhook2"})
        assert result == {
            "results": [{"channel": "webhook2", "format": "json", "ok": True, "error": None}]
        }
        [sent] = await two.requests.wait_for(1)
        assert sent.json()["title"] == "pokeralph · test notification"
        assert one.requests.items == []
        with pytest.raises(RpcError) as refused:
            await d.call("notify.test", {"channel": "nope"})
        assert refused.value.data["field"] == "channel"
