"""The notifier's parts on their own: a flood coalesced per battle and rate-limited per
channel (time moved on a fake clock), a failing channel retried with backoff, the
repository's layer only quieter, URLs redacted, the macOS script escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from anyio import wait_all_tasks_blocked

from pokeralph_core.config import layers as config_layers
from pokeralph_core.config.model import NotifyConfig
from pokeralphd.errors import CorruptFile, InvalidParams
from pokeralphd.notify import macos
from pokeralphd.notify.channel import SendFailed
from pokeralphd.notify.coalesce import BATCH_MAX
from pokeralphd.notify.compose import Message
from pokeralphd.notify.links import item_link
from pokeralphd.notify.outbox import Limits
from pokeralphd.notify.service import NotifyService
from pokeralphd.protocol import events as ev
from pokeralphd.server.eventbus import EventBus
from pokeralphd.store import config_views, config_writes
from tests.fakeclock import FakeClock

pytestmark = pytest.mark.anyio
LIMITS = Limits(window=3.0, burst=2, interval=10.0, attempts=3, backoff=2.0)


class Recording:
    name = "desktop"
    kind = "desktop"

    def __init__(self, fail: int = 0) -> None:
        self.sent: list[Message] = []
        self.tries = 0
        self.fail = fail

    async def send(self, message: Message) -> None:
        self.tries += 1
        if self.tries <= self.fail:
            raise SendFailed("down")
        self.sent.append(message)


async def _service(channel: Recording, clock: FakeClock, bus: EventBus) -> NotifyService:
    async def config(_repo: str | None) -> NotifyConfig:
        return NotifyConfig(desktop=True)

    return NotifyService(
        bus, config, lambda: "http://127.0.0.1:9/", clock, LIMITS, desktop=lambda: channel
    )


def _complete(bus: EventBus, task: str) -> None:
    bus.publish(ev.BattleComplete(task_id=task, iterations=1, cost_usd=0.0), "r", task)


async def test_a_flood_is_coalesced_per_battle_and_rate_limited_per_channel() -> None:
    import anyio

    bus, clock, channel = EventBus(), FakeClock(), Recording()
    service = await _service(channel, clock, bus)
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        for _ in range(50):  # one battle, fifty events
            bus.publish(ev.BattleFailed(task_id="a", error="x", iterations=1), "r", "a")
        for i in range(6):  # six more battles
            _complete(bus, f"t{i}")
        not_a_kind = ev.IterationStart(task_id="a", iteration=2, max_iterations=None)
        bus.publish(not_a_kind, "r", "a")
        await wait_all_tasks_blocked()
        assert channel.sent == []  # the window is open
        clock.advance(LIMITS.window)
        await wait_all_tasks_blocked()
        # seven battles, seven messages due, two tokens: one message, then one digest
        # of the other six (a battle's notices beyond BATCH_MAX are not kept)
        assert [m.count for m in channel.sent] == [BATCH_MAX, 6]
        assert channel.sent[0].kinds == ("failed",)
        digest = channel.sent[1]
        assert digest.title == "pokeralph: 6 notifications"
        assert digest.link == "http://127.0.0.1:9/#/dashboard"
        # more battles in the meantime wait for the next token, then go as one again
        for i in range(3):
            _complete(bus, f"u{i}")
        await wait_all_tasks_blocked()
        clock.advance(LIMITS.window)
        await wait_all_tasks_blocked()
        assert len(channel.sent) == 2
        clock.advance(LIMITS.interval)
        await wait_all_tasks_blocked()
        assert [m.count for m in channel.sent] == [BATCH_MAX, 6, 3]
        clock.advance(1000)
        await wait_all_tasks_blocked()
        assert len(channel.sent) == 3
        await service.stop()


async def test_a_failing_channel_is_retried_with_backoff_then_given_up() -> None:
    import anyio

    bus, clock, channel = EventBus(), FakeClock(), Recording(fail=99)
    service = await _service(channel, clock, bus)
    failed: list[Any] = []

    def record(event: Any) -> bool:
        failed.append(event)
        return True

    bus.subscribe(record, types=["notify_failed"])
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        _complete(bus, "a")
        await wait_all_tasks_blocked()
        clock.advance(LIMITS.window)
        await wait_all_tasks_blocked()
        assert channel.tries == 1
        clock.advance(LIMITS.backoff)
        await wait_all_tasks_blocked()
        assert channel.tries == 2
        clock.advance(LIMITS.backoff * 2)
        await wait_all_tasks_blocked()
        assert channel.tries == 3 and len(failed) == 1
        payload = failed[0].payload
        assert payload["attempts"] == 3 and payload["error"] == "down"
        assert failed[0].task_id == "a" and failed[0].repo == "r"
        await service.stop()


def test_the_repository_layer_only_makes_notifications_quieter(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    repo = tmp_path / "repo" / ".pokeralph" / "config.json"
    repo.parent.mkdir(parents=True)
    hook = {"url": "https://ntfy.sh/private-topic", "format": "ntfy"}
    config_writes.update_user_layer(
        user, {"notify": {"desktop": False, "webhooks": [hook], "events": ["complete", "failed"]}}
    )
    repo.write_text(
        json.dumps(
            {"notify": {"desktop": True, "events": ["failed", "waiting"], "includeDetails": True}}
        )
    )
    loaded = config_layers.load(user, repo)
    notify = loaded.config.notify
    assert (notify.desktop, notify.events, notify.include_details) == (False, ["failed"], False)
    assert [h.url for h in notify.webhooks] == [hook["url"]]
    # trusted, the same: a repository never turns notifications up
    config_writes.set_trust(user, repo, repo.parent.parent, True)
    assert config_layers.load(user, repo).config.notify == notify
    # shown redacted, everywhere a config is described
    described = msgspec.json.encode(
        [config_views.config_result(loaded), config_views.user_config_result(user)]
    ).decode()
    assert "private-topic" not in described and "<secret: https://ntfy.sh/…>" in described


def test_a_repository_may_not_name_a_webhook(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    repo = tmp_path / "repo" / ".pokeralph" / "config.json"
    repo.parent.mkdir(parents=True)
    planted = {"notify": {"webhooks": [{"url": "https://evil.example/x"}]}}
    with pytest.raises(InvalidParams) as refused:
        config_writes.update_repo_layer(user, repo, repo.parent.parent, planted, None)
    assert refused.value.data["field"] == "notify.webhooks"
    repo.write_text(json.dumps(planted))
    with pytest.raises(CorruptFile):
        config_layers.load(user, repo)


def test_a_redacted_url_written_back_is_refused(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    back = {"notify": {"webhooks": [{"url": config_layers.redact_url("https://x.y/secret")}]}}
    with pytest.raises(InvalidParams) as refused:
        config_writes.update_user_layer(user, back)
    assert "secret" not in refused.value.message


def test_links_name_the_item_and_no_secret() -> None:
    base = "http://127.0.0.1:8123/"
    assert item_link(base, "my repo", "t/1") == base + "#/battle/my%20repo/t%2F1"
    assert item_link(base, "r", "t", "d-1") == base + "#/inbox/r/d-1"
    assert item_link(None, "r", "t") is None


def test_the_macos_script_escapes_what_it_shows() -> None:
    message = Message('say "hi" \\ bye', 'line\n"two"', "http://127.0.0.1:1/#/x", ("failed",))
    command = macos.command(message)
    assert command[:2] == ["osascript", "-e"]
    assert command[2] == (
        'display notification "line\n\\"two\\"\nhttp://127.0.0.1:1/#/x" '
        'with title "pokeralph" subtitle "say \\"hi\\" \\\\ bye"'
    )
