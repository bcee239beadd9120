"""What both chat clients share: the reply they return, the request (one POST over
:mod:`.transport`) with its timeout, bounded retries, and bounded reading of a streamed
body.

A call is retried (at most :attr:`ChatClient.retries` more times, with a doubling
backoff) when the connection fails or the server answers 5xx or 429 before it streamed
anything; once text reached the caller it is not retried (the text would repeat).
Nothing answering at all becomes :class:`ServerUnreachable` with the hint to start the
server; a setting that makes every call fail (an ``apiKey`` an HTTP header cannot carry)
is a :class:`SettingError`, never retried, as are a base URL whose host does not resolve
or whose certificate is not trusted: neither is a server to start. Everything a reply can make us hold is bounded: a line of the stream
(:data:`MAX_LINE`), the reply's text (:data:`MAX_TEXT`, the rest dropped with a note),
tool calls per reply (:data:`MAX_TOOL_CALLS`) and their arguments (:data:`MAX_ARGUMENTS`).
"""

from __future__ import annotations

import abc
import base64
import enum
import json
import ssl
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio

from pokeralph_agent import transport
from pokeralph_agent.errors import (
    BACKOFF,
    RETRIES,
    ApiStatusError,
    CertificateUntrusted,
    ConnectFailed,
    HostNotFound,
    HttpFailure,
    ServerUnreachable,
    SettingError,
    TimedOut,
    UnsendableRequest,
    WireError,
    shown_url,
)
from pokeralph_core.local_config import api_key_problem

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from pokeralph_agent.session import Message

MAX_LINE = 4 << 20
MAX_TEXT = 256 * 1024
MAX_TOOL_CALLS = 32
MAX_ARGUMENTS = 1 << 20
ARGUMENTS_TOO_LONG = f"the arguments are longer than {MAX_ARGUMENTS // 1024} KB"
MAX_ERROR_BODY = 16 * 1024


@dataclass
class ToolCallRequest:
    """One tool call as the model asked for it. ``arguments`` is the parsed JSON (any
    type: the loop checks it); ``error`` says why it could not be parsed."""

    id: str
    name: str
    arguments: Any
    error: str | None = None


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None
    notes: list[str] = field(default_factory=list)  # what was cut, and why

    def add_text(self, piece: str) -> str:
        """Append ``piece`` within :data:`MAX_TEXT`; the part kept."""
        room = MAX_TEXT - len(self.text)
        if room <= 0:
            return ""
        if len(piece) > room:
            self.notes.append(
                f"the reply was longer than {MAX_TEXT // 1024} KB; the rest was dropped"
            )
            piece = piece[:room]
        self.text += piece
        return piece


def call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """Arguments as the model sent them: an object already (Ollama), or a JSON string
    (OpenAI). Broken JSON is an error for the model, never an exception."""
    if isinstance(raw, str):
        if len(raw) > MAX_ARGUMENTS:
            return None, ARGUMENTS_TOO_LONG
        if not raw.strip():
            return {}, None
        try:
            return json.loads(raw), None
        except (json.JSONDecodeError, RecursionError) as exc:
            return None, f"the arguments are not valid JSON ({exc}): {raw[:200]!r}"
    if raw is None:
        return {}, None
    return raw, None


def int_count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class ChatClient(abc.ABC):
    """One model on one server; :meth:`chat` sends the conversation and streams a reply."""

    api = "chat"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout: float = 120.0,
        api_key: str | None = None,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
    ) -> None:
        self.base_url = base_url  # as agent.local checked it: no trailing "/"
        self._login = _basic_auth(base_url)
        self.model = model
        self.timeout = timeout
        self.api_key = api_key
        self.retries = retries
        self.backoff = backoff
        self._ssl: ssl.SSLContext | None = None

    def _tls_context(self) -> ssl.SSLContext | None:
        """The system's CAs for an ``https`` server, loaded at its first call (they cost
        ~30 ms); None for a plain ``http`` server (the usual local one), which never
        reaches TLS as no redirect is followed."""
        if not self.base_url.lower().startswith("https://"):
            return None
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    @abc.abstractmethod
    def url(self) -> str:
        """The chat endpoint."""

    @abc.abstractmethod
    def body(self, messages: Sequence[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The request body."""

    @abc.abstractmethod
    def reader(self, reply: Reply, on_text: Callable[[str], None]) -> StreamReader:
        """A reader of this API's stream, filling ``reply``."""

    async def chat(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]],
        on_text: Callable[[str], None] | None = None,
    ) -> Reply:
        body = self.body(messages, tools)
        delivered = [False]

        def text(piece: str) -> None:
            delivered[0] = True
            if on_text is not None:
                on_text(piece)

        attempt = 0
        while True:
            try:
                return await self._once(body, text)
            except (ServerUnreachable, ApiStatusError) as exc:
                retry = isinstance(exc, ServerUnreachable) or exc.retryable
                if not retry or delivered[0] or attempt >= self.retries:
                    raise
            await anyio.sleep(self.backoff * (2**attempt))
            attempt += 1

    async def _once(self, body: dict[str, Any], on_text: Callable[[str], None]) -> Reply:
        reply = Reply()
        # JSON as httpx sent it: UTF-8, compact
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        auth = []
        if self.api_key:
            problem = api_key_problem(self.api_key)
            if problem is not None:
                raise SettingError(f"agent.local.apiKey cannot be used: {problem}")
            auth.append(("authorization", f"Bearer {self.api_key}"))
        elif self._login is not None:
            auth.append(("authorization", self._login))
        try:
            async with transport.post(
                self.url(), data.encode(), auth, self.timeout, self._tls_context()
            ) as response:
                if response.status >= 400:
                    raise ApiStatusError(response.status, await error_text(response))
                await self.reader(reply, on_text).read(bounded_lines(response.body()))
        except UnsendableRequest as exc:
            raise SettingError(f"the request cannot be sent: {exc.message}") from None
        except HostNotFound as exc:
            raise SettingError(
                f"the host of {shown_url(self.base_url)} is not found ({exc.message}): check "
                "the host in agent.local.baseUrl"
            ) from None
        except CertificateUntrusted as exc:
            raise SettingError(
                f"the certificate of {shown_url(self.base_url)} is not trusted ({exc.message}):"
                " for a server on this machine use http://, or point SSL_CERT_FILE at the "
                "certificate of the CA that signed it"
            ) from None
        except ConnectFailed as exc:
            raise ServerUnreachable(self.base_url, self.api, exc.message) from None
        except TimedOut as exc:  # a send, or a wait for bytes
            raise ApiStatusError(None, f"{exc.message} (agent.local.timeoutSeconds)") from None
        except HttpFailure as exc:
            raise ApiStatusError(None, exc.message) from None
        return reply


def _basic_auth(url: str) -> str | None:
    """The ``Authorization: Basic`` value of a login in the URL (``http://user:pw@host``),
    as httpx sent it; None without one."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    login = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(login.encode()).decode("ascii")


class Line(enum.Enum):
    SKIP = "skip"  # a line that carries no chunk
    END = "end"  # the stream's own end mark


class StreamReader(abc.ABC):
    """Fills one reply from one API's streamed body. The loop, the JSON and error
    checks are shared; a subclass says what a line carries (:meth:`data`), what a chunk
    adds (:meth:`take`) and what the end must find (:meth:`end`)."""

    sender = "the server"  # who sent the stream, and what a unit of it is called,
    unit = "an event"  # for errors

    def __init__(self, reply: Reply, on_text: Callable[[str], None]) -> None:
        self.reply = reply
        self.on_text = on_text

    @abc.abstractmethod
    def data(self, line: bytes) -> bytes | str | Line:
        """The JSON a line carries, or :attr:`Line.SKIP`, or :attr:`Line.END`."""

    @abc.abstractmethod
    def take(self, chunk: dict[str, Any]) -> bool:
        """Add a chunk to the reply; true when it was the last."""

    @abc.abstractmethod
    def end(self, over: bool) -> None:
        """Finish the reply; ``over`` says whether the stream marked its end."""

    async def read(self, lines: AsyncIterator[bytes]) -> None:
        over = False
        async for line in lines:
            data = self.data(line)
            if data is Line.SKIP:
                continue
            if data is Line.END:
                over = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise WireError(
                    f"{self.sender} sent {self.unit} that is not JSON: {data[:200]!r}"
                ) from None
            if not isinstance(chunk, dict):
                raise WireError(
                    f"{self.sender} sent {self.unit} that is not an object: {data[:200]!r}"
                )
            message = error_message(chunk)
            if message is not None:
                raise ApiStatusError(None, message)
            self.reply.model = chunk.get("model") or self.reply.model
            if self.take(chunk):
                over = True
                break
        self.end(over)

    def text(self, piece: Any) -> None:
        """Keep a piece of text (within :data:`MAX_TEXT`) and pass the kept part on."""
        if isinstance(piece, str) and piece:
            kept = self.reply.add_text(piece)
            if kept:
                self.on_text(kept)

    def room_for_call(self, calls: int) -> bool:
        """Whether a reply holding ``calls`` tool calls may take one more; noted once
        when not."""
        if calls < MAX_TOOL_CALLS:
            return True
        if not any("tool calls" in n for n in self.reply.notes):
            self.reply.notes.append(
                f"more than {MAX_TOOL_CALLS} tool calls in one reply; the rest were dropped"
            )
        return False


async def error_text(response: transport.Response) -> str:
    """The message of an error response: ``{"error": "…"}`` (Ollama), ``{"error":
    {"message": …}}`` (OpenAI), or the body's start."""
    data = bytearray()
    async for chunk in response.body():
        data.extend(chunk)
        if len(data) > MAX_ERROR_BODY:
            break
    text = data[:MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.strip()[:500] or response.reason
    return error_message(parsed) or text[:500]


def error_message(parsed: Any) -> str | None:
    if not isinstance(parsed, dict):
        return None
    err = parsed.get("error")
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    return None


async def bounded_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The body's lines (without ``\\n``/``\\r\\n``); a line past :data:`MAX_LINE` is a
    :class:`WireError`, never held whole."""
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        start = 0
        while (newline := buf.find(b"\n", start)) >= 0:
            yield bytes(buf[start:newline]).rstrip(b"\r")
            start = newline + 1
        del buf[:start]
        if len(buf) > MAX_LINE:
            raise WireError(f"a line of the reply is longer than {MAX_LINE >> 20} MB")
    if buf.strip():
        yield bytes(buf).rstrip(b"\r")
