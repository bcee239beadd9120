"""The ``sandbox.*`` settings people edit, and the host patterns of ``sandbox.network.allow``.

Pure and bounded: paths are checked for their form only (absolute or ``~/…``, no ``..``,
no NUL, at most :data:`MAX_PATH_LEN` bytes, at most :data:`MAX_PATHS` of each kind); what
they mean on this machine (and that none of them opens a secret) is the policy's job
(the daemon's ``pokeralphd.sandbox.policy``). A host pattern is ``host``, ``host:port``,
``*.domain`` or ``*.domain:port``, or an IP literal (``[v6]`` with a port); a pattern
without a port allows ports 80 and 443 only (``127.0.0.1`` does not open every local
service: name the port).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from pokeralph_core.model_base import Model

SandboxMode = Literal["auto", "required", "off"]
NetworkMode = Literal["none", "allowlist", "full"]
MAX_PATHS = 64  # of readOnly, and of readWrite
MAX_PATH_LEN = 4096
MAX_HOSTS = 256
DEFAULT_PORTS = (80, 443)  # what a pattern without a port allows
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


class SandboxPathError(ValueError):
    """Raised when a listed path is not of a form the sandbox accepts."""


def check_path(raw: str) -> str:
    """``raw`` if it is an absolute or ``~/`` path without ``..`` (the form only)."""
    if not raw or len(raw.encode(errors="surrogateescape")) > MAX_PATH_LEN or "\0" in raw:
        raise SandboxPathError(f"{raw[:80]!r} is empty, too long or has a NUL byte")
    if not (raw.startswith("/") or raw == "~" or raw.startswith("~/")):
        raise SandboxPathError(f"{raw!r} must be absolute or start with ~/")
    if ".." in raw.split("/"):
        raise SandboxPathError(f"{raw!r} must not contain '..'")
    return raw


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One entry of ``sandbox.network.allow``: a host (or ``*.`` a domain's subdomains)
    and a port (None: 80 and 443)."""

    host: str
    port: int | None = None
    wildcard: bool = False

    def matches(self, host: str, port: int) -> bool:
        host = normalize_host(host)
        if self.port is None and port not in DEFAULT_PORTS:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        host = ("*." if self.wildcard else "") + host
        return host if self.port is None else f"{host}:{self.port}"


def normalize_host(host: str) -> str:
    """Lower case, without a trailing dot or IPv6 brackets."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def parse_host_pattern(raw: str) -> HostPattern:
    """A :class:`HostPattern` from ``raw``; ValueError naming what is wrong."""
    text = raw.strip().lower()
    if not text or len(text) > 300:
        raise ValueError(f"{raw[:80]!r}: a host pattern is 1 to 300 characters")
    port: int | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{raw!r}: unclosed [")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{raw!r}: expected :port after ]")
            port = _port(raw, rest[1:])
        try:
            ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise ValueError(f"{raw!r}: not an IPv6 address") from exc
        return HostPattern(host, port)
    if text.count(":") > 1:
        raise ValueError(f"{raw!r}: write an IPv6 address in brackets, [::1]:8080")
    if ":" in text:
        text, port_text = text.split(":")
        port = _port(raw, port_text)
    wildcard = text.startswith("*.")
    host = text[2:] if wildcard else text
    host = host.rstrip(".")
    labels = host.split(".")
    if "*" in host or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{raw!r}: not a host name, *.domain or IP address")
    if wildcard and len(labels) < 2:
        raise ValueError(f"{raw!r}: a wildcard needs a domain of two labels at least")
    return HostPattern(host, port, wildcard)


def _port(raw: str, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{raw!r}: the port must be 1 to 65535")
    return int(text)


class FilesystemConfig(Model):
    """Folders and files of the host made visible inside, beyond the working tree."""

    read_only: list[str] = Field(default_factory=list, max_length=MAX_PATHS)
    read_write: list[str] = Field(default_factory=list, max_length=MAX_PATHS)

    @field_validator("read_only", "read_write")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        return [check_path(p) for p in value]


class NetworkConfig(Model):
    """What a run may reach: nothing, the model and the allowed hosts, or everything."""

    mode: NetworkMode = "allowlist"
    allow: list[str] = Field(default_factory=list, max_length=MAX_HOSTS)

    @field_validator("allow")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [str(parse_host_pattern(h)) for h in value]

    def patterns(self) -> tuple[HostPattern, ...]:
        return tuple(parse_host_pattern(h) for h in self.allow)


class SandboxConfig(Model):
    """``sandbox``: ``auto`` confines where the platform can (and warns where not),
    ``required`` refuses to run unconfined, ``off`` runs as the user."""

    mode: SandboxMode = "auto"
    filesystem: FilesystemConfig = Field(default_factory=FilesystemConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
