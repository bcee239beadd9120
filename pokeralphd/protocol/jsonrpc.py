"""JSON-RPC 2.0 envelopes: parsing requests, building responses, batches, spec errors.

Follows the specification to the letter: a parse error or an invalid request whose id
cannot be read answers with ``id: null``; notifications (no ``id`` member) never get a
reply, not even an error; an empty batch is one invalid-request error; a batch of only
notifications gets no reply at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

Id = str | int | float | None
NO_ID: Any = msgspec.UNSET  # marker: no ``id`` member, the request is a notification


class Request(msgspec.Struct, forbid_unknown_fields=True):
    """A valid request. Well-formed messages decode straight into it in one typed pass;
    anything else is judged member by member by :func:`parse_request`."""

    jsonrpc: Literal["2.0"]
    method: str
    params: list[Any] | dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    id: int | str | float | msgspec.UnsetType | None = msgspec.UNSET

    @property
    def is_notification(self) -> bool:
        return self.id is msgspec.UNSET

    @property
    def params_or_none(self) -> list[Any] | dict[str, Any] | None:
        return None if self.params is msgspec.UNSET else self.params


@dataclass(slots=True)
class InvalidMessage:
    """A message that is not a valid Request; ``id`` is what could be read of it."""

    id: Id
    reason: str


_fast_decoder = msgspec.json.Decoder(Request)


def decode_request_fast(body: bytes) -> Request | None:
    """A single well-formed request object, or None (let :func:`parse_request` judge it)."""
    try:
        return _fast_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):  # nested too deep: decode() says so
        return None


def decode_many_fast(bodies: list[bytes]) -> list[Request] | None:
    """Several message bodies at once, if each is a single well-formed request; else None.

    One ``decode_lines`` call for the whole read (bodies never contain a newline).
    """
    if len(bodies) == 1:
        one = decode_request_fast(bodies[0])
        return None if one is None else [one]
    try:
        msgs = _fast_decoder.decode_lines(b"\n".join(bodies))
    except (msgspec.DecodeError, RecursionError):
        return None
    return msgs if len(msgs) == len(bodies) else None


def decode(body: bytes) -> Any:
    """Parse JSON; raises ``msgspec.DecodeError`` on invalid JSON or UTF-8, or JSON nested
    deeper than the interpreter's recursion limit (msgspec raises RecursionError there,
    which would otherwise end the connection's task and the daemon with it)."""
    try:
        return _decoder.decode(body)
    except RecursionError as exc:
        raise msgspec.DecodeError("JSON is nested too deeply") from exc


def parse_request(obj: Any) -> Request | InvalidMessage:
    if not isinstance(obj, dict):
        return InvalidMessage(None, "a request must be a JSON object")
    raw_id = obj.get("id", NO_ID)
    if raw_id is not NO_ID and (
        isinstance(raw_id, bool) or not isinstance(raw_id, str | int | float | type(None))
    ):
        return InvalidMessage(None, "id must be a string, a number or null")
    readable_id = None if raw_id is NO_ID else raw_id
    if obj.get("jsonrpc") != "2.0":
        return InvalidMessage(readable_id, 'jsonrpc must be exactly "2.0"')
    method = obj.get("method")
    if not isinstance(method, str):
        return InvalidMessage(readable_id, "method must be a string")
    params = obj.get("params")
    if "params" in obj and not isinstance(params, list | dict):
        return InvalidMessage(readable_id, "params must be an array or an object")
    extra = set(obj) - {"jsonrpc", "method", "params", "id"}
    if extra:
        return InvalidMessage(readable_id, f"unexpected member(s): {', '.join(sorted(extra))}")
    return Request(
        "2.0", method, params if isinstance(params, list | dict) else msgspec.UNSET, raw_id
    )


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": int(code), "message": message}
    if data is not None:
        err["data"] = data
    return err


def error_response(request_id: Id, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error_object(code, message, data)}


def result_response(request_id: Id, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def encode(message: Any) -> bytes:
    return _encoder.encode(message)
