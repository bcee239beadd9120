"""Hostile or broken model output, over real HTTP from the scripted servers: the chat
clients and the loop turn every kind of it into an error the model (or the user) reads,
never a crash; the clients retry what is worth retrying and bound what they hold."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from pokeralph_agent.chat import (
    ARGUMENTS_TOO_LONG,
    MAX_ARGUMENTS,
    MAX_TEXT,
    MAX_TOOL_CALLS,
    Reply,
)
from pokeralph_agent.errors import ApiStatusError, ServerUnreachable, WireError
from pokeralph_agent.loop import AgentLoop, Approval
from pokeralph_agent.ollama_chat import OllamaClient
from pokeralph_agent.openai_chat import OpenAIClient
from pokeralph_agent.sandbox import Sandbox
from pokeralph_agent.session import Message, Session, SessionStore, ToolCall, ToolResult
from pokeralph_agent.tools import Toolbox
from pokeralph_agent.toolspec import TOOLS, ToolSpec
from tests.fakes.ollama_api import ApiError, Call, OllamaAPI, Raw, Text, Tools
from tests.fakes.openai_api import OpenAIAPI

pytestmark = pytest.mark.anyio
USER = [Message(role="user", content="hi")]


def _ollama(url: str, **kwargs: Any) -> OllamaClient:
    return OllamaClient(url, "m", timeout=5, backoff=0.01, **kwargs)


def _openai(url: str, **kwargs: Any) -> OpenAIClient:
    return OpenAIClient(url, "m", timeout=5, backoff=0.01, **kwargs)


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


DONE = _line({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True})


async def test_ollama_streams_text_tool_calls_and_counts() -> None:
    script: list[Any] = [Tools([Call("read_file", {"path": "a"})], text="Let me look.")]
    with OllamaAPI(script) as api:
        pieces: list[str] = []
        reply = await _ollama(api.url).chat(USER, [t.schema() for t in TOOLS], pieces.append)
        body = api.chat_requests()[0].body
    assert "".join(pieces) == reply.text == "Let me look." and len(pieces) > 1
    (call,) = reply.tool_calls
    assert (call.name, call.arguments, call.error) == ("read_file", {"path": "a"}, None)
    assert (reply.input_tokens, reply.output_tokens, reply.finish_reason) == (42, 7, "stop")
    assert body["stream"] is True and body["tools"][0]["function"]["name"] == "create_file"


async def test_openai_joins_argument_pieces_and_reads_usage() -> None:
    calls = [Call("create_file", {"path": "a.py", "content": "x" * 100}), Call("list_dir", {})]
    with OpenAIAPI([Tools(calls)], api_key="sk-local") as api:
        reply = await _openai(api.url, api_key="sk-local").chat(USER, [])
        request = api.chat_requests()[0]
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("create_file", {"path": "a.py", "content": "x" * 100}),
        ("list_dir", {}),
    ]
    assert [c.id for c in reply.tool_calls] == [c.id for c in calls]
    assert (reply.input_tokens, reply.output_tokens, reply.finish_reason) == (42, 7, "tool_calls")
    assert request.headers["authorization"] == "Bearer sk-local"
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.path == "/v1/chat/completions"


async def test_broken_arguments_are_errors_for_the_model() -> None:
    bad = [Call("read_file", raw_arguments='{"path": "a"'), Call("read_file", raw_arguments="[1")]
    with OpenAIAPI([Tools(bad)]) as api:
        reply = await _openai(api.url + "/v1").chat(USER, [])
    assert all(
        c.arguments is None and "not valid JSON" in (c.error or "") for c in reply.tool_calls
    )
    with OllamaAPI([Tools([Call("read_file", raw_arguments="{oops")])]) as api:
        reply = await _ollama(api.url).chat(USER, [])
    assert "not valid JSON" in (reply.tool_calls[0].error or "")


async def test_arguments_past_the_bound_are_an_error_for_the_model() -> None:
    """Streamed in pieces (OpenAI) or whole (Ollama), arguments past MAX_ARGUMENTS are not
    kept: the call carries the same error either way."""
    huge = Call("create_file", {"path": "a", "content": "x" * (MAX_ARGUMENTS + 10)})
    with OpenAIAPI([Tools([huge])]) as api:
        pieced = await _openai(api.url + "/v1").chat(USER, [])
    with OllamaAPI([Tools([Call("create_file", raw_arguments=json.dumps(huge.arguments))])]) as api:
        whole = await _ollama(api.url).chat(USER, [])
    for reply in (pieced, whole):
        (call,) = reply.tool_calls
        assert (call.arguments, call.error) == (None, ARGUMENTS_TOO_LONG)


async def test_a_huge_reply_and_too_many_calls_are_bounded() -> None:
    huge = "z" * (MAX_TEXT + 50_000)
    many = [Call("list_dir", {}) for _ in range(MAX_TOOL_CALLS + 8)]
    with OllamaAPI([Text(huge), Tools(many)]) as api:
        client = _ollama(api.url)
        long = await client.chat(USER, [])
        crowded = await client.chat(USER, [])
    assert len(long.text) == MAX_TEXT and "dropped" in long.notes[0]
    assert len(crowded.tool_calls) == MAX_TOOL_CALLS and "tool calls" in crowded.notes[0]


async def test_broken_streams_are_wire_errors() -> None:
    cases: list[Any] = [
        Raw([b"not json"]),
        Raw([_line({"model": "m", "message": {"content": "half"}, "done": False})]),
        Raw([b"[1, 2]"]),
        Raw([_line({"error": "model runner crashed"})]),
    ]
    with OllamaAPI(cases) as api:
        client = _ollama(api.url, retries=0)
        for expected in (WireError, WireError, WireError, ApiStatusError):
            with pytest.raises(expected):
                await client.chat(USER, [])
    with OpenAIAPI(
        [Raw([b"data: {bad", b""], "text/event-stream"), Raw([b"data: {}", b""])]
    ) as api:
        client2 = _openai(api.url, retries=0)
        with pytest.raises(WireError, match="not JSON"):
            await client2.chat(USER, [])
        with pytest.raises(WireError, match="ended before"):
            await client2.chat(USER, [])


async def test_5xx_is_retried_and_4xx_is_not() -> None:
    with OllamaAPI([ApiError(503, "loading"), ApiError(500, "oom"), Text("ok")]) as api:
        reply = await _ollama(api.url, retries=2).chat(USER, [])
        assert reply.text == "ok" and len(api.chat_requests()) == 3
    with OllamaAPI([ApiError(404, 'model "m" not found, try pulling it first')]) as api:
        with pytest.raises(ApiStatusError, match='HTTP 404: model "m" not found') as caught:
            await _ollama(api.url, retries=2).chat(USER, [])
        assert caught.value.status == 404 and len(api.chat_requests()) == 1
    with OpenAIAPI([ApiError(500, "boom", sticky=True)]) as api:
        with pytest.raises(ApiStatusError, match="HTTP 500: boom"):
            await _openai(api.url, retries=1).chat(USER, [])
        assert len(api.chat_requests()) == 2


async def test_nothing_listening_says_what_to_start() -> None:
    # a port held bound but not listening: refused, and no other test can take it meanwhile
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(ServerUnreachable, match=r"connection refused.*ollama serve"):
            await _ollama(url, retries=1).chat(USER, [])
        with pytest.raises(ServerUnreachable, match="LM Studio"):
            await _openai(url, retries=0).chat(USER, [])


async def test_a_login_in_the_url_is_sent_and_never_shown() -> None:
    """http://user:pw@host logs in with Basic auth (as httpx did) unless an apiKey is
    set; a message naming the URL leaves the password out."""
    with OllamaAPI([Text("a"), Text("b")]) as api:
        login = api.url.replace("http://", "http://me:p%40ss@")
        await _ollama(login).chat(USER, [])
        await _ollama(login, api_key="sk-1").chat(USER, [])
        first, second = api.chat_requests()
    assert first.headers["authorization"] == "Basic bWU6cEBzcw=="  # me:p@ss
    assert second.headers["authorization"] == "Bearer sk-1"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = f"http://me:secret@127.0.0.1:{held.getsockname()[1]}/v1"
        with pytest.raises(ServerUnreachable) as caught:
            await _openai(url, retries=0).chat(USER, [])
    shown = url.replace(":secret", "")
    assert f"nothing answers at {shown} (" in caught.value.message
    assert "secret" not in caught.value.message and caught.value.base_url == shown


class Allow:
    async def __call__(self, call: ToolCall, spec: ToolSpec) -> Approval:
        return Approval(True, "policy")


class Quiet:
    def text(self, piece: str) -> None:
        pass

    def assistant(self, message: Message, reply: Reply) -> None:
        pass

    def tool_result(self, call: ToolCall, result: ToolResult, shown: str) -> None:
        pass


async def test_the_loop_tells_the_model_what_was_wrong(tmp_path: Path) -> None:
    script: list[Any] = [
        Tools(
            [
                Call("rm_rf", {"path": "/"}),
                Call("read_file", raw_arguments="{nope"),
                Call("read_file", {"path": 7}),
                Call("read_file", {"path": "a.txt", "encoding": "utf-8"}),
                Call("fetch_webpage", {"url": "http://127.0.0.1:1/"}),
                Call("read_file", {"path": "a.txt"}),
            ]
        ),
        Text("done"),
    ]
    (tmp_path / "a.txt").write_text("content\n")
    tools = [t for t in TOOLS if t.name != "fetch_webpage"]
    with OpenAIAPI(script) as api:
        loop = AgentLoop(
            _openai(api.url),
            Toolbox(Sandbox(tmp_path)),
            Allow(),
            Quiet(),
            SessionStore(tmp_path / "sessions"),
            tools,
        )
        session = Session(working_dir=str(tmp_path), model="m")
        outcome = await loop.run(session, "go")
        sent = [m["content"] for m in api.tool_messages()]
    assert outcome.stop_reason == "end_turn" and outcome.text == "done"
    assert "'rm_rf' does not exist" in sent[0]
    assert "not valid JSON" in sent[1]
    assert "'path' must be a string" in sent[2]
    assert "has no argument 'encoding'" in sent[3]
    assert "'fetch_webpage' is not offered" in sent[4]
    assert sent[5] == "content\n"
    assert [r.success for r in session.tool_results] == [False] * 5 + [True]


def test_only_an_https_server_costs_the_systems_certificates() -> None:
    """A plain-http server (the usual local one) never reaches TLS, so its client
    builds no context; an https server's verifies with the system's CAs."""
    assert _ollama("http://127.0.0.1:11434")._tls_context() is None
    client = _openai("HTTPS://models.example.com/v1")
    secure = client._tls_context()
    assert secure is not None and secure is client._tls_context()  # loaded once
    assert secure.get_ca_certs() == ssl.create_default_context().get_ca_certs()
    assert secure.verify_mode == ssl.CERT_REQUIRED and secure.check_hostname
