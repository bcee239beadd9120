"""The local agent's settings, ``agent.local``.

It owns :class:`LocalAgentConfig` with its defaults, bounds and URL check, and
:data:`LocalApi`. They live apart from
:mod:`pokeralphd.domain.models` (which re-exports them) so that the local agent, which the
daemon starts for every iteration of a battle, checks its flags with the very model the
config uses without loading every other model of the seed.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StrictBool, StrictInt

from pokeralph_core.model_base import Model

LocalApi = Literal["ollama", "openai"]


def _http_url(url: str) -> str:
    if not re.fullmatch(r"https?://[^\s/?#]+(?:/[^\s?#]*)?", url):
        raise ValueError(
            f"must be an http:// or https:// URL like http://localhost:11434, got {url!r}"
        )
    try:
        parts = urlsplit(url)
    except ValueError:  # an IPv6 address without its closing "]"
        raise ValueError(f"must name a host, as in http://localhost:11434, got {url!r}") from None
    if not parts.hostname:
        raise ValueError(f"must name a host, as in http://localhost:11434, got {url!r}")
    try:
        port = parts.port  # checks it: digits, at most 65535
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"must have a port from 1 to 65535 after the host, got {url!r}")
    return url.rstrip("/")


def api_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be sent as a bearer token in an HTTP header, or None. Said to
    the user under the key's name, so it names no setting and never shows the key."""
    if re.fullmatch(r"(?:[!-~]+(?:[ \t]+[!-~]+)*)?", key):  # printable ASCII, spaces inside
        return None
    if "\n" in key or "\r" in key:
        why = "a line break (copied with the key?)"
    elif not key.isascii():
        why = "a character that is not ASCII"
    elif key.strip(" \t") != key:
        why = "a space at its start or end"
    else:
        why = "a control character"
    return f"an HTTP header cannot carry it: it holds {why}"


def _api_key(key: str | None) -> str | None:
    problem = None if key is None else api_key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


class LocalAgentConfig(Model):
    """The local-model agent (``agent.backend local``, seed 001): where the model server
    is, which API it speaks, and the agent loop's bounds (ours)."""

    base_url: Annotated[str, AfterValidator(_http_url)] = Field(
        default="http://localhost:11434",
        description="The model server: Ollama (http://localhost:11434), LM Studio "
        "(http://localhost:1234/v1), llama.cpp's llama-server (http://localhost:8080/v1), "
        "vLLM (http://localhost:8000/v1)",
    )
    api: LocalApi = Field(
        default="ollama",
        description="ollama: Ollama's native /api/chat; openai: an OpenAI-compatible "
        "/v1/chat/completions (LM Studio, llama.cpp, vLLM, Ollama too)",
    )
    api_key: Annotated[str | None, AfterValidator(_api_key)] = Field(
        default=None, description="Bearer token, for OpenAI-compatible servers that want one"
    )
    max_turns: StrictInt = Field(
        default=50, ge=1, le=1000, description="Model replies per run; then it stops"
    )
    context_messages: StrictInt = Field(
        default=100,
        ge=10,
        le=1000,
        description="Messages sent to the model; older ones are archived beside the session",
    )
    timeout_seconds: float = Field(
        default=120,
        ge=5,
        le=300,
        description="Bounds connecting to the model server, each send and each wait for "
        "bytes of one model call (a local model loading its weights takes a while before "
        "the first token)",
    )
    fetch_webpage: StrictBool = Field(
        default=False, description="Offer the fetch_webpage tool (it reaches the network)"
    )
    default_rules: StrictBool = Field(
        default=True,
        description="Install the read-only default approval rules into the user's config "
        "once (remove any with `pokeralphctl rules rm ID`)",
    )
