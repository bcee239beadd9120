"""The backends' parsers on the real tools' lines (../shared/AGENT-FORMATS.md)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pokeralph_core.config.model import AgentConfig
from pokeralphd.agents.base import (
    AgentNotice,
    AgentRateLimit,
    AgentRequest,
    AgentResult,
    AgentStarted,
    AgentText,
    AgentToolResult,
    AgentToolUse,
)
from pokeralphd.agents.claude import ClaudeBackend
from pokeralphd.agents.codex import CodexBackend
from pokeralphd.agents.command import CommandBackend
from pokeralphd.agents.runner import classify_api_failure, reset_from_text
from pokeralphd.domain.models import Usage


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_claude_events() -> None:
    b = ClaudeBackend()
    assert b.parse_line(
        line({"type": "system", "subtype": "init", "session_id": "s1", "model": "m"})
    ) == [AgentStarted("s1", "m", 0)]
    assistant = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls -la"}},
            ]
        },
    }
    assert b.parse_line(line(assistant)) == [
        AgentText("hi"),
        AgentToolUse("Bash", "ls -la", "t", {"command": "ls -la"}),
    ]
    user = {
        "type": "user",
        "message": {
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "<promise>COMPLETE</promise>"}],
                    "is_error": True,
                }
            ]
        },
    }
    assert b.parse_line(line(user)) == [AgentToolResult("<promise>COMPLETE</promise>", True, "t")]
    limit = {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1785993600,
            "rateLimitType": "five_hour",
        },
    }
    assert b.parse_line(line(limit)) == [AgentRateLimit("rejected", 1785993600.0, "five_hour")]
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": "Invalid API key",
        "session_id": "s1",
        "total_cost_usd": 0.04,
        "num_turns": 6,
        "duration_ms": 15000,
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }
    (parsed,) = b.parse_line(line(result))
    assert isinstance(parsed, AgentResult) and parsed.is_error and parsed.cost_usd == 0.04
    assert parsed.usage is not None and parsed.usage.output_tokens == 50
    assert b.parse_line(line({"type": "system", "subtype": "hook_started"})) == []
    assert isinstance(b.parse_line(line({"type": "shiny_new"}))[0], AgentNotice)
    assert isinstance(b.parse_line(b"not json")[0], AgentNotice)
    assert isinstance(b.parse_line(line({"type": "assistant", "message": "weird"}))[0], AgentNotice)


@given(st.binary(max_size=300))
def test_parsers_never_raise(data: bytes) -> None:
    for backend in (ClaudeBackend(), CodexBackend(), CommandBackend()):
        backend.parse_line(data)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["type", "message", "content", "item", "result", "usage", "text"]),
                c,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_parsers_never_raise_on_json(value: object) -> None:
    for backend in (ClaudeBackend(), CodexBackend()):
        backend.parse_line(line(value))


def test_codex_events() -> None:
    b = CodexBackend()
    events = [
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {
                "id": "1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "a\nb",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"id": "2", "type": "agent_message", "text": "Done."}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
        },
    ]
    parsed = [e for ev in events for e in b.parse_line(line(ev))]
    assert parsed[0] == AgentStarted("th", None, 0)
    assert (
        AgentToolUse("shell", "bash -lc ls", "1", {"command": "bash -lc ls"}) in parsed
        and AgentToolResult("a\nb", False, "1") in parsed
    )
    result = parsed[-1]
    assert isinstance(result, AgentResult) and result.text == "Done." and result.usage is not None
    assert result.usage.cache_read_input_tokens == 24448 and result.cost_usd is None
    (failed,) = b.parse_line(line({"type": "turn.failed", "error": {"message": "boom"}}))
    assert isinstance(failed, AgentResult) and failed.is_error and failed.text == "boom"
    assert failed.api_error_status is None and failed.api_error_type is None
    assert b.parse_line(line({"type": "item.updated", "item": {"type": "todo_list"}})) == []
    reasoning = {"type": "item.completed", "item": {"id": "3", "type": "reasoning", "text": "hm"}}
    (thought,) = b.parse_line(line(reasoning))
    assert isinstance(thought, AgentNotice)  # not a tool call


def request(**config: object) -> AgentRequest:
    return AgentRequest(
        prompt="PROMPT", cwd=Path("."), mode="execute", config=AgentConfig.model_validate(config)
    )


def test_argv() -> None:
    claude = ClaudeBackend().argv(request(model="opus", extraArgs=["--add-dir", "/x"]))
    assert claude[:7] == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
    ]
    assert claude[-4:] == ["--model", "opus", "--add-dir", "/x"] and "PROMPT" not in claude
    plan = AgentRequest(
        prompt="P", cwd=Path("."), mode="plan", config=AgentConfig(), resume_session="abc"
    )
    argv = ClaudeBackend().argv(plan)
    assert (
        argv[argv.index("--permission-mode") + 1] == "dontAsk"
        and argv[argv.index("--tools") + 1] == "Read,Grep,Glob"
        and argv[argv.index("--resume") + 1] == "abc"
    )
    assert ClaudeBackend().stdin_bytes(request()) == b"PROMPT"
    as_arg = request(promptVia="argument")
    assert (
        ClaudeBackend().argv(as_arg)[-1] == "PROMPT" and ClaudeBackend().stdin_bytes(as_arg) is None
    )
    assert (
        CodexBackend().argv(request())[:3] == ["codex", "exec", "--json"]
        and CodexBackend().argv(request())[-1] == "-"
    )
    assert CommandBackend().argv(request(backend="command", command="/bin/agent")) == ["/bin/agent"]


NOW = 1_800_000_000.0


def api_result(text: str, status: int | None = None, kind: str | None = None) -> AgentResult:
    return AgentResult(text, True, "success", 0.0, None, 1, 310, "s", status, kind)


def test_claude_api_error_result_is_parsed() -> None:
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 429,
        "result": "API Error: Request rejected (429) · Rate limited. Please try again later.",
        "session_id": "s",
        "total_cost_usd": 0,
        "terminal_reason": "api_error",
        "api_error_type": "rate_limit_error",
    }
    (parsed,) = ClaudeBackend().parse_line(line(result))
    assert isinstance(parsed, AgentResult)
    assert parsed.api_error_status == 429 and parsed.api_error_type == "rate_limit_error"
    weird = {**result, "api_error_status": True, "api_error_type": 5}
    (parsed,) = ClaudeBackend().parse_line(line(weird))
    assert isinstance(parsed, AgentResult) and parsed.api_error_status is None
    assert parsed.api_error_type is None
    allowed = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}
    assert ClaudeBackend().parse_line(line(allowed)) == [AgentRateLimit("allowed", None, None)]


def test_api_failures_are_classified() -> None:
    msg429 = "API Error: Request rejected (429) · Rate limited. Please try again later."
    limited = classify_api_failure(api_result(msg429, 429, "rate_limit_error"), [], NOW)
    assert limited is not None and limited.kind == "rate_limit" and limited.resets_at is None
    over = classify_api_failure(api_result("API Error: 529 ...", 529, "overloaded_error"), [], NOW)
    assert over is not None and over.kind == "overloaded" and over.status == 529
    server = classify_api_failure(api_result("x", 503, None), [], NOW)
    assert server is not None and server.kind == "server"
    assert classify_api_failure(api_result("x", None, "api_error"), [], NOW) is not None
    # Without the structured fields, the status in the CLI's message is the fallback.
    text_only = classify_api_failure(api_result('API Error: 529 {"type":"error"}'), [], NOW)
    assert text_only is not None and text_only.kind == "overloaded"
    assert classify_api_failure(api_result(msg429), [], NOW) is not None
    # The agent's own failures are not the API's.
    assert classify_api_failure(api_result("Invalid API key · Please run /login"), [], NOW) is None
    assert classify_api_failure(api_result("x", 401, "authentication_error"), [], NOW) is None
    assert classify_api_failure(None, [], NOW) is None
    ok = AgentResult("API Error: 529 quoted by the agent", False, "success", 0, None, 1, 1, "s")
    assert classify_api_failure(ok, [], NOW) is None
    # A reset printed on stderr (a header) is read.
    headed = classify_api_failure(api_result(msg429, 429), ["retry-after: 90"], NOW)
    assert headed is not None and headed.resets_at == NOW + 90


def test_resets_are_read_from_messages_and_headers() -> None:
    assert reset_from_text("retry-after: 30", NOW) == NOW + 30
    assert reset_from_text("Please try again in 5 minutes.", NOW) == NOW + 300
    assert reset_from_text(f"Claude AI usage limit reached|{int(NOW) + 3600}", NOW) == NOW + 3600
    assert reset_from_text(f"resetsAt: {int(NOW) + 60}", NOW) == NOW + 60
    iso = "anthropic-ratelimit-requests-reset: 2027-01-15T08:00:30Z"
    stamp = reset_from_text(iso, NOW)
    assert stamp is not None and stamp > NOW
    assert reset_from_text("Rate limited. Please try again later.", NOW) is None
    assert reset_from_text(f"resets at {int(NOW) - 10}", NOW) is None  # in the past
    assert reset_from_text(f"resets at {int(NOW) + 30 * 86400}", NOW) is None  # implausible


@given(st.text(max_size=300))
def test_reset_reading_never_raises(text: str) -> None:
    when = reset_from_text(text, NOW)
    assert when is None or NOW < when <= NOW + 7 * 86400


def test_codex_sandbox_and_network_flags() -> None:
    argv = CodexBackend().argv(request(model="gpt-5", extraArgs=["-c", "features.plugins=true"]))
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("-m") + 1] == "gpt-5" and argv[-1] == "-"
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    # Sandboxed commands get no network; the CLI itself talks to the model endpoint only
    # (no web search, plugin sync, analytics or metrics); the user's extra args come last.
    assert overrides == [
        "sandbox_workspace_write.network_access=false",
        'web_search="disabled"',
        "features.plugins=false",
        "analytics.enabled=false",
        'otel.metrics_exporter="none"',
        "features.plugins=true",
    ]
    assert "--skip-git-repo-check" not in argv
    plan = AgentRequest(
        prompt="P", cwd=Path("."), mode="plan", config=AgentConfig(), resume_session="th1"
    )
    argv = CodexBackend().argv(plan)
    # --sandbox belongs to exec, not to its resume subcommand: it comes first.
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert argv.index("--sandbox") < argv.index("resume") and argv[-3:] == ["resume", "th1", "-"]


# turn.failed messages as codex 0.169 prints them (tests/fakes/CODEX-FACTS.md).
CODEX_FAILURES = [
    ("exceeded retry limit, last status: 429 Too Many Requests, request id: r1", "rate_limit", 429),
    ("rate limit exceeded: Rate limit reached. Please try again in 1.5s.", "rate_limit", None),
    ("You've hit your usage limit. Try again at 3:04 PM.", "rate_limit", None),
    (
        "We\u2019re currently experiencing high demand, which may cause temporary errors.",
        "server",
        None,
    ),
    ("unexpected status 502 Bad Gateway: Bad gateway, url: http://x/v1/responses", "server", 502),
    ("exceeded retry limit, last status: 503 Service Unavailable", "server", 503),
    ("unexpected status 529 <unknown status code>: overloaded, url: http://x", "overloaded", 529),
    ("Selected model is at capacity. Please try a different model.", "overloaded", None),
    ("stream disconnected before completion: boom", "server", None),
    ("unexpected status 401 Unauthorized: Incorrect API key provided: sk-x", None, 401),
    ("Quota exceeded. Check your plan and billing details.", None, None),
    ("Missing environment variable: `OPENAI_API_KEY`.", None, None),
    ('{"error": {"message": "Bad thing", "type": "invalid_request_error"}}', None, None),
]


def test_codex_turn_failed_is_classified_like_the_api_failure_it_reports() -> None:
    for message, kind, status in CODEX_FAILURES:
        b = CodexBackend()
        b.parse_line(line({"type": "thread.started", "thread_id": "th"}))
        (notice,) = b.parse_line(line({"type": "error", "message": message}))
        assert isinstance(notice, AgentNotice)  # the retries' news, never the outcome
        (failed,) = b.parse_line(line({"type": "turn.failed", "error": {"message": message}}))
        assert isinstance(failed, AgentResult) and failed.is_error and failed.text == message
        assert failed.session_id == "th"
        failure = classify_api_failure(failed, [], NOW)
        assert (failure.kind if failure else None) == kind, message
        assert failure is None or failure.status == status, message


def test_codex_resumed_thread_counts_only_its_own_run() -> None:
    """turn.completed reports the thread's running total, earlier runs included."""
    first = CodexBackend()
    first.argv(request())
    first.parse_line(line({"type": "thread.started", "thread_id": "resumable"}))
    usage = {"input_tokens": 100, "cached_input_tokens": 50, "output_tokens": 10}
    (one,) = first.parse_line(line({"type": "turn.completed", "usage": usage}))
    second = CodexBackend()
    resumed = AgentRequest(
        prompt="P", cwd=Path("."), mode="plan", config=AgentConfig(), resume_session="resumable"
    )
    second.argv(resumed)
    second.parse_line(line({"type": "thread.started", "thread_id": "resumable"}))
    total = {"input_tokens": 1100, "cached_input_tokens": 550, "output_tokens": 15}
    (two,) = second.parse_line(line({"type": "turn.completed", "usage": total}))
    assert isinstance(one, AgentResult) and isinstance(two, AgentResult)
    assert one.usage == Usage(input_tokens=50, output_tokens=10, cache_read_input_tokens=50)
    assert two.usage == Usage(input_tokens=500, output_tokens=5, cache_read_input_tokens=500)


def test_codex_usage_is_not_counted_twice_and_warnings_are_notices() -> None:
    b = CodexBackend()
    usage = {
        "input_tokens": 24763,
        "cached_input_tokens": 24448,
        "cache_write_input_tokens": 12,
        "output_tokens": 122,
        "reasoning_output_tokens": 64,
    }
    (result,) = b.parse_line(line({"type": "turn.completed", "usage": usage}))
    assert isinstance(result, AgentResult)
    assert result.usage == Usage(
        input_tokens=315,
        output_tokens=122,
        cache_read_input_tokens=24448,
        cache_creation_input_tokens=12,
        reasoning_output_tokens=64,
    )
    odd = {"input_tokens": 5, "cached_input_tokens": 9, "output_tokens": "x"}
    (result,) = b.parse_line(line({"type": "turn.completed", "usage": odd}))
    assert isinstance(result, AgentResult) and result.usage is not None
    assert result.usage.input_tokens == 0 and result.usage.cache_read_input_tokens == 5
    warning = {"type": "item.completed", "item": {"type": "error", "message": "no metadata"}}
    (notice,) = b.parse_line(line(warning))
    assert isinstance(notice, AgentNotice) and "no metadata" in notice.text


def test_old_usage_loads_without_reasoning_tokens() -> None:
    usage = Usage.model_validate({"inputTokens": 1, "outputTokens": 2})
    assert usage.reasoning_output_tokens == 0
    assert usage.plus(Usage(reasoning_output_tokens=3)).reasoning_output_tokens == 3


def test_a_usage_error_keeps_its_cause_above_the_usage_text() -> None:
    """What clap-style CLIs (Codex) print for a bad flag: the cause, a tip, then a usage
    text longer than the tail kept; the error shown leads with the cause."""
    from pokeralphd.agents.runner import _stderr_words

    printed = [
        "error: unexpected argument '--no-such-flag' found",
        "",
        "  tip: to pass '--no-such-flag' as a value, use '-- --no-such-flag'",
        "",
        "Usage: codex exec [OPTIONS] [PROMPT]",
        "       codex exec [OPTIONS] <COMMAND> [ARGS]",
        "",
        "For more information, try '--help'.",
    ]
    words = _stderr_words(printed).splitlines()
    assert words[0] == "error: unexpected argument '--no-such-flag' found"
    assert words[-1] == "For more information, try '--help'." and "" not in words
    assert _stderr_words(["one", "", "two"]) == "one\ntwo"
    assert _stderr_words([]) == ""
