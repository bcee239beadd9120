"""``config get|set|unset`` with dotted keys, JSON values and the layer of each key."""

from __future__ import annotations

from pokeralphctl.commands.config import parse_value, split_key
from tests.cli.conftest import Ctl, envelope


def test_get_lists_every_key_with_its_layer(ctl: Ctl) -> None:
    proc = ctl("config", "get")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    assert rows["agent.backend"][1:] == ["claude", "default"]
    assert rows["maxIterationsPerTask"][1:] == ["10", "default"]
    result = envelope(ctl("config", "get", "--json"))["result"]
    assert result["sources"]["mode"] == "default"


def test_set_get_unset_dotted_keys(ctl: Ctl) -> None:
    proc = ctl("config", "set", "agent.backend", "demo")
    assert proc.returncode == 0, proc.stderr
    assert "agent.backend = demo" in proc.stdout
    assert ctl("config", "get", "agent.backend").stdout.split() == ["demo", "(repo)"]
    got = envelope(ctl("config", "get", "agent.backend", "--json"))["result"]
    assert got == {"key": "agent.backend", "value": "demo", "source": "repo"}

    # JSON values: a number, a list, a boolean; snake_case keys are accepted
    assert ctl("config", "set", "max_iterations_per_task", "5").returncode == 0
    assert ctl("config", "set", "feedbackLoops", '["test"]').returncode == 0
    assert ctl("config", "set", "autoCommit", "false").returncode == 0
    config = envelope(ctl("config", "get", "--json"))["result"]
    assert config["config"]["maxIterationsPerTask"] == 5
    assert config["config"]["feedbackLoops"] == ["test"]
    assert config["config"]["autoCommit"] is False
    assert config["repoLayer"]["agent"] == {"backend": "demo"}

    proc = ctl("config", "unset", "agent.backend")
    assert proc.returncode == 0, proc.stderr
    value = envelope(ctl("config", "get", "agent.backend", "--json"))["result"]
    assert value["value"] == "claude" and value["source"] != "repo"
    assert ctl("config", "unset", "maxIterationsPerTask").returncode == 0
    value = envelope(ctl("config", "get", "maxIterationsPerTask", "--json"))["result"]
    assert value == {"key": "maxIterationsPerTask", "value": 10, "source": "default"}


def test_out_of_range_value_names_the_field(ctl: Ctl) -> None:
    proc = ctl("config", "set", "maxIterationsPerTask", "1000")
    assert proc.returncode == 1
    assert "maxIterationsPerTask" in proc.stderr
    proc = ctl("config", "set", "agent.backend", "nonsense", "--json")
    assert proc.returncode == 1
    error = envelope(proc)["error"]
    assert error["code"] == -32602 and error["data"]["field"] == "agent.backend"
    value = envelope(ctl("config", "get", "maxIterationsPerTask", "--json"))["result"]
    assert value["value"] == 10  # nothing was written


def test_unknown_key(ctl: Ctl) -> None:
    proc = ctl("config", "get", "agent.nope")
    assert proc.returncode == 1
    assert "no config key" in proc.stderr and "pokeralphctl config get" in proc.stderr


def test_map_keys_are_kept_verbatim() -> None:
    assert split_key("agent.env.ANTHROPIC_API_KEY") == ["agent", "env", "ANTHROPIC_API_KEY"]
    assert split_key("feedback_commands.type_check") == ["feedbackCommands", "type_check"]
    assert split_key("agent.extra_args") == ["agent", "extraArgs"]
    assert split_key("max_iterations_per_task") == ["maxIterationsPerTask"]
    # the daemon takes camelCase only: every object of the config's own fields is converted
    assert split_key("budget.per_battle_usd") == ["budget", "perBattleUsd"]
    assert split_key("roles.verifier.local.base_url") == ["roles", "verifier", "local", "baseUrl"]
    assert split_key("agent.local.fetch_webpage") == ["agent", "local", "fetchWebpage"]
    assert split_key("permissions.ask_timeout_minutes") == ["permissions", "askTimeoutMinutes"]


def test_set_an_environment_variable_and_a_loop_command(ctl: Ctl) -> None:
    proc = ctl("config", "set", "agent.env.ANTHROPIC_API_KEY", "sk-test")
    assert proc.returncode == 0, proc.stderr
    assert "agent.env.ANTHROPIC_API_KEY = sk-test" in proc.stdout
    got = envelope(ctl("config", "get", "agent.env.ANTHROPIC_API_KEY", "--json"))["result"]
    assert got == {"key": "agent.env.ANTHROPIC_API_KEY", "value": "sk-test", "source": "repo"}
    assert ctl("config", "get", "agent.env.ANTHROPIC_API_KEY").stdout.split() == [
        "sk-test",
        "(repo)",
    ]
    proc = ctl("config", "set", "feedback_commands.type_check", "mypy .")
    assert proc.returncode == 0, proc.stderr
    config = envelope(ctl("config", "get", "--json"))["result"]
    assert config["config"]["agent"]["env"] == {"ANTHROPIC_API_KEY": "sk-test"}
    assert config["config"]["feedbackCommands"] == {"type_check": "mypy ."}


def test_map_entries_take_the_value_as_a_string(ctl: Ctl) -> None:
    assert parse_value("1", ["agent", "env", "DEBUG"]) == "1"
    assert parse_value("true", ["feedbackCommands", "test"]) == "true"
    assert parse_value("1", ["maxIterationsPerTask"]) == 1
    proc = ctl("config", "set", "agent.env.DEBUG", "1")
    assert proc.returncode == 0, proc.stderr
    assert envelope(ctl("config", "get", "--json"))["result"]["config"]["agent"]["env"] == {
        "DEBUG": "1"
    }


def test_the_user_layer_by_hand_never_opened(ctl: Ctl) -> None:
    """``config set|get|unset --user`` and ``notify test`` (issue 26): a person sets a
    webhook without opening the file; its URL is a secret, shown redacted; the test
    notification is sent and reports what happened."""
    hook = '[{"name": "team", "url": "http://127.0.0.1:9/hook?token=s3cret", "format": "ntfy"}]'
    proc = ctl("config", "set", "--user", "notify.webhooks", hook)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout and "user layer" in proc.stdout
    shown = ctl("config", "get", "--user", "notify.webhooks")
    assert shown.returncode == 0, shown.stderr
    assert "team" in shown.stdout and "s3cret" not in shown.stdout
    layer = envelope(ctl("config", "get", "--user", "--json"))["result"]
    assert "s3cret" not in str(layer)
    # the repository's own layer was not touched
    assert "notify" not in envelope(ctl("config", "get", "--json"))["result"]["repoLayer"]

    sent = ctl("notify", "test", "team")  # nothing listens on port 9: a clear failure
    assert sent.returncode == 1
    assert "team (ntfy): failed" in sent.stdout and "s3cret" not in sent.stdout + sent.stderr
    unknown = ctl("notify", "test", "nobody", "--json")
    assert unknown.returncode == 1 and envelope(unknown)["error"]["data"]["field"] == "channel"

    assert ctl("config", "unset", "--user", "notify.webhooks").returncode == 0
    after = envelope(ctl("config", "get", "--user", "notify.webhooks", "--json"))["result"]
    assert after["value"] == [] and after["source"] == "default"
