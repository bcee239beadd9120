"""``sandbox.*``: the config model's bounds and path forms, and host patterns."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pokeralph_core.config.sandbox import (
    MAX_HOSTS,
    MAX_PATHS,
    HostPattern,
    SandboxConfig,
    parse_host_pattern,
)


def test_the_defaults_confine_with_the_allowlist() -> None:
    config = SandboxConfig()
    assert config.mode == "auto" and config.network.mode == "allowlist"
    assert config.dump() == {
        "mode": "auto",
        "filesystem": {"readOnly": [], "readWrite": []},
        "network": {"mode": "allowlist", "allow": []},
    }


def test_camel_case_keys_and_unknown_keys_refused() -> None:
    config = SandboxConfig.model_validate(
        {"filesystem": {"readOnly": ["~/.cache/pip"], "readWrite": ["/srv/data"]}}
    )
    assert config.filesystem.read_only == ["~/.cache/pip"]
    with pytest.raises(ValidationError, match="readonly"):
        SandboxConfig.model_validate({"filesystem": {"readonly": []}})
    with pytest.raises(ValidationError, match="mode"):
        SandboxConfig.model_validate({"mode": "sometimes"})


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("relative/x", "absolute"),
        ("~user/x", "absolute"),
        ("/a/../b", "'..'"),
        ("/a\0b", "NUL"),
        ("", "empty"),
        ("/" + "x" * 5000, "too long"),
    ],
)
def test_a_bad_path_is_named(path: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        SandboxConfig.model_validate({"filesystem": {"readWrite": [path]}})


def test_lists_are_bounded() -> None:
    with pytest.raises(ValidationError, match=str(MAX_PATHS)):
        SandboxConfig.model_validate({"filesystem": {"readOnly": ["/x"] * (MAX_PATHS + 1)}})
    with pytest.raises(ValidationError, match=str(MAX_HOSTS)):
        SandboxConfig.model_validate({"network": {"allow": ["a.com"] * (MAX_HOSTS + 1)}})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("pypi.org", HostPattern("pypi.org")),
        ("PyPI.org.", HostPattern("pypi.org")),
        ("*.example.com:8443", HostPattern("example.com", 8443, wildcard=True)),
        ("127.0.0.1:9000", HostPattern("127.0.0.1", 9000)),
        ("[::1]:80", HostPattern("::1", 80)),
    ],
)
def test_host_patterns_parse(raw: str, expected: HostPattern) -> None:
    assert parse_host_pattern(raw) == expected


@pytest.mark.parametrize(
    "raw", ["", "*", "*.com", "a*.b.com", "host:0", "host:70000", "::1", "[::1", "a b.com"]
)
def test_bad_host_patterns_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=r"host|port|IPv6|bracket|wildcard|\["):
        parse_host_pattern(raw)


def test_matching_ports_and_wildcards() -> None:
    plain = parse_host_pattern("pypi.org")
    assert plain.matches("PYPI.ORG", 443) and plain.matches("pypi.org", 80)
    assert not plain.matches("pypi.org", 8080) and not plain.matches("evil-pypi.org", 443)
    wild = parse_host_pattern("*.example.com")
    assert wild.matches("api.example.com", 443) and wild.matches("a.b.example.com", 443)
    assert not wild.matches("example.com", 443) and not wild.matches("badexample.com", 443)
    local = parse_host_pattern("127.0.0.1:9000")
    assert local.matches("127.0.0.1", 9000) and not local.matches("127.0.0.1", 9001)
    assert str(parse_host_pattern("*.Example.com:81")) == "*.example.com:81"
    assert str(parse_host_pattern("[::1]:80")) == "[::1]:80"
    normalized = SandboxConfig.model_validate({"network": {"allow": ["PyPI.org"]}})
    assert normalized.network.allow == ["pypi.org"]
