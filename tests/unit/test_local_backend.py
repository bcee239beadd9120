"""The daemon's ``local`` backend: how it starts the agent, and that what the agent
prints is Claude Code's stream-json as the claude parser reads it."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pokeralph_agent.chat import Reply, ToolCallRequest
from pokeralph_agent.loop import Outcome
from pokeralph_agent.session import Message, Session, ToolCall, ToolResult
from pokeralph_agent.streamjson import StreamJsonOut
from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import (
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
    PermissionAnswer,
)
from pokeralphd.agents.local import LocalBackend
from pokeralphd.errors import AgentError


async def _ask(_: object) -> PermissionAnswer:
    return PermissionAnswer(True)


def _request(mode: str = "execute", **local: object) -> AgentRequest:
    config = AgentConfig.model_validate(
        {"backend": "local", "model": "qwen2.5-coder:7b", "local": local}
    )
    return AgentRequest(
        prompt="do it",
        cwd=Path("/repo"),
        mode=mode,  # type: ignore[arg-type]
        config=config,
        env={"POKERALPH_REPO_PATH": "/repo", "POKERALPH_TASK_ID": "001-hello"},
        permissions=_ask,
    )


def test_it_runs_the_agent_module_with_the_settings() -> None:
    request = _request(baseUrl="http://localhost:1234/v1", api="openai", maxTurns=7)
    backend = get_backend(request.config)
    assert isinstance(backend, LocalBackend)
    argv = backend.argv(request)
    assert argv[:4] == [sys.executable, "-m", "pokeralph_agent", "--stream-json"]
    flags = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert flags["--api"] == "openai" and flags["--base-url"] == "http://localhost:1234/v1"
    assert flags["--max-turns"] == "7" and flags["--model"] == "qwen2.5-coder:7b"
    assert "--permission-prompt-tool" in argv and "stdio" in argv
    assert argv[argv.index("--session-dir") + 1] == "/repo/.pokeralph/battles/001-hello/sessions"
    assert backend.routes_permissions(request)
    plan = _request("plan")
    assert not backend.routes_permissions(plan)
    assert "--permission-prompt-tool" not in backend.argv(plan)
    assert backend.argv(plan)[backend.argv(plan).index("--permission-mode") + 1] == "plan"


def test_a_model_is_required() -> None:
    request = _request()
    request.config = AgentConfig.model_validate({"backend": "local"})
    with pytest.raises(AgentError, match="needs a model"):
        LocalBackend().argv(request)


def test_the_key_goes_on_stdin_never_on_the_command_line() -> None:
    backend = LocalBackend()
    request = _request(apiKey="sk-secret")
    assert not any("sk-secret" in a for a in backend.argv(request))
    assert "sk-secret" not in json.dumps(request.env)
    init, prompt = backend.stdin_bytes(request).splitlines()  # type: ignore[union-attr]
    assert json.loads(init)["request"] == {
        "subtype": "initialize",
        "hooks": None,
        "apiKey": "sk-secret",
    }
    assert json.loads(prompt)["message"] == {"role": "user", "content": "do it"}
    assert len(backend.stdin_bytes(_request()).splitlines()) == 1  # type: ignore[union-attr]


def test_what_the_agent_prints_is_read_by_the_claude_parser() -> None:
    out = io.BytesIO()
    session = Session(working_dir="/repo", model="qwen2.5-coder:7b")
    stream = StreamJsonOut(out, session)
    stream.init(["read_file"], "default")
    reply = Reply(text="Reading.", input_tokens=10, output_tokens=3)
    reply.tool_calls.append(ToolCallRequest("call_1", "read_file", {"path": "a.py"}))
    call = ToolCall(id="call_1", tool_name="read_file", parameters={"path": "a.py"})
    stream.assistant(Message(role="assistant", content="Reading.", tool_calls=[call]), reply)
    stream.tool_result(
        call, ToolResult(tool_call_id="call_1", success=False, error="gone"), "Error: gone"
    )
    stream.result(Outcome("end_turn", text="done", turns=2, input_tokens=30, output_tokens=9), 1500)
    events = [e for line in out.getvalue().splitlines() for e in LocalBackend().parse_line(line)]
    started, text, use, result, final = events
    assert isinstance(started, AgentStarted) and started.session_id == session.id
    assert isinstance(text, AgentText) and text.text == "Reading."
    assert isinstance(use, AgentToolUse) and (use.name, use.summary) == ("read_file", "a.py")
    assert isinstance(result, AgentToolResult) and result.is_error and result.text == "Error: gone"
    assert isinstance(final, AgentResult) and final.cost_usd == 0 and final.num_turns == 2
    assert final.usage is not None and (final.usage.input_tokens, final.usage.output_tokens) == (
        30,
        9,
    )
    assert not final.is_error and final.text == "done"


def test_a_failed_model_call_is_reported_as_claude_code_reports_one() -> None:
    out = io.BytesIO()
    stream = StreamJsonOut(out, Session(working_dir="/repo", model="m"))
    stream.result(
        Outcome("error", error="the model server answered HTTP 503: busy", error_status=503), 5
    )
    stream.result(Outcome("max_turns", turns=50), 5)
    (failed,) = LocalBackend().parse_line(out.getvalue().splitlines()[0])
    assert isinstance(failed, AgentResult) and failed.is_error and failed.api_error_status == 503
    (stopped,) = LocalBackend().parse_line(out.getvalue().splitlines()[1])
    assert isinstance(stopped, AgentResult) and stopped.subtype == "error_max_turns"


def test_a_server_that_is_down_is_transient_for_the_battle() -> None:
    from pokeralphd.agents.runner import classify_api_failure

    out = io.BytesIO()
    stream = StreamJsonOut(out, Session(working_dir="/repo", model="m"))
    down = "nothing answers at http://localhost:11434 (connection refused): is Ollama running?"
    stream.result(Outcome("error", error=down, transient=True), 5)
    stream.result(Outcome("error", error="HTTP 404: model not found", error_status=404), 5)
    lines = out.getvalue().splitlines()
    (first,) = LocalBackend().parse_line(lines[0])
    (second,) = LocalBackend().parse_line(lines[1])
    assert isinstance(first, AgentResult) and isinstance(second, AgentResult)
    failure = classify_api_failure(first, [], 0.0)
    assert failure is not None and failure.kind == "server" and "ollama" in failure.message.lower()
    assert classify_api_failure(second, [], 0.0) is None  # a missing model: counted, not retried


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-turns", "0"], "--max-turns"),
        (["--timeout", "0"], "--timeout"),
        (["--context-messages", "5000"], "--context-messages"),
        (["--base-url", "ftp://example.com"], "--base-url"),
        (["--base-url", "http://127.0.0.1:abc"], "--base-url: .*port from 1 to 65535"),
        (["--base-url", "http://127.0.0.1:65536"], "--base-url: .*port from 1 to 65535"),
        (["--base-url", "http://user@/v1"], "--base-url: .*must name a host"),
        (["--retry-backoff", "-1"], "--retry-backoff"),
        (["--retry-backoff", "nan"], "--retry-backoff"),
    ],
)
def test_the_commands_flags_are_checked_as_the_config_is(
    flags: list[str], named: str, tmp_path: Path
) -> None:
    """A flag out of agent.local's range is an error naming the flag; 0 never falls back
    to the default (``--max-turns 0`` once ran 50 turns)."""
    from pokeralph_agent.cli import Settings, UsageError, parser

    args = parser().parse_args(["--stream-json", *flags])  # no config files are read
    with pytest.raises(UsageError, match=named):
        Settings(args, tmp_path)
    fine = Settings(parser().parse_args(["--stream-json", "--max-turns", "7"]), tmp_path)
    assert (fine.max_turns, fine.context, fine.timeout) == (7, 100, 120)


def test_a_refused_key_names_what_to_set_for_each_backend() -> None:
    """Claude Code is logged in by hand; a local model server's key is agent.local.apiKey
    (running pokeralph-agent logs nothing in, as the hint once said)."""
    from pokeralphd.agents.base import AgentOutcome, AgentResult
    from pokeralphd.agents.claude import ClaudeBackend
    from pokeralphd.agents.runner import _error_of

    refused = AgentResult(
        "the model server answered HTTP 401: Incorrect API key", True, None, 0, None, 1, 1, None
    )
    outcome = AgentOutcome(exit_code=1, reason="exited", result=refused)
    local = _error_of(LocalBackend(), outcome, []) or ""
    assert "config set agent.local.apiKey KEY" in local and "log in" not in local
    assert "run `claude` once by hand to log in" in (_error_of(ClaudeBackend(), outcome, []) or "")


def test_each_agent_local_flag_is_stored_under_the_key_it_sets() -> None:
    from pokeralph_agent.cli import FLAGS, parser
    from pokeralph_core.local_config import LocalAgentConfig

    options = {o for action in parser()._actions for o in action.option_strings}
    dests = vars(parser().parse_args([]))
    for key, flag in FLAGS.items():
        assert flag in options and key in dests and key in LocalAgentConfig.model_fields


PROBES = {
    "--max-turns": ["-1", "0", "1", "2", "999", "1000", "1001"],
    "--context-messages": ["0", "9", "10", "11", "1000", "1001"],
    "--timeout": ["0", "4.99", "5", "5.5", "120", "300", "300.01", "nan", "inf", "-inf"],
    "--base-url": [
        "http://localhost:11434",
        "http://localhost:1234/v1/",
        "https://models.example.com/v1",
        "HTTP://x",
        "ftp://example.com",
        "http://",
        "http:///v1",
        "http://host name",
        "http://host?q=1",
        "http://host/#frag",
        "localhost:11434",
        "",
    ],
    "--api": ["ollama", "openai"],
}


@pytest.mark.parametrize("flag", sorted(PROBES))
def test_a_flag_agent_local_refuses_is_an_error_naming_the_flag(flag: str, tmp_path: Path) -> None:
    """Battle mode checks its flags with LocalAgentConfig itself: what it accepts is
    kept as the config keeps it, what it refuses is a usage error naming the flag."""
    from pydantic import ValidationError

    from pokeralph_agent.cli import FLAGS, Settings, UsageError, parser
    from pokeralph_core.local_config import LocalAgentConfig

    key = {f: k for k, f in FLAGS.items()}[flag]
    attribute = {"context_messages": "context", "timeout_seconds": "timeout"}.get(key, key)
    for value in PROBES[flag]:
        args = parser().parse_args(["--stream-json", f"{flag}={value}"])
        try:
            expected = getattr(LocalAgentConfig.model_validate({key: getattr(args, key)}), key)
        except ValidationError:
            with pytest.raises(UsageError, match=flag):
                Settings(args, tmp_path)
        else:
            assert getattr(Settings(args, tmp_path), attribute) == expected, value


def test_the_config_refuses_an_api_key_with_a_line_break() -> None:
    from pokeralph_core.config.layers import validate
    from pokeralphd.errors import InvalidParams

    with pytest.raises(InvalidParams) as caught:
        validate({"agent": {"local": {"apiKey": "sk-secret\n"}}}, None)
    message = caught.value.message
    assert "agent.local.apiKey" in message and "line break" in message
    assert "sk-secret" not in message
    assert validate({"agent": {"local": {"apiKey": "sk-1"}}}, None).agent.local.api_key == "sk-1"


def test_a_session_file_keeps_no_password_of_the_base_url(tmp_path: Path) -> None:
    from pokeralph_agent.cli import Settings, _new_session, parser

    args = parser().parse_args(["--stream-json", "--model", "m"])
    args.base_url = "http://me:secret@models.example:8080/v1"
    settings = Settings(args, tmp_path)
    assert settings.base_url == args.base_url  # the client still logs in with it
    session = _new_session(settings, [], plan=False)
    assert session.base_url == "http://me@models.example:8080/v1"
