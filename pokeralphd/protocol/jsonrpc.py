"""JSON-RPC 2.0 envelopes: parsing requests, building responses, batches, spec errors.

Follows the specification to the letter: a parse error or an invalid request whose id
cannot be read answers with ``id: null``; notifications (no ``id`` member) never get a
reply, not even an error; an empty batch is one invalid-request error; a batch of only
notifications gets no reply at all.

Decoding never raises anything but :class:`ParseError`, whatever the bytes: invalid JSON,
invalid UTF-8 (which msgspec reports as ``UnicodeDecodeError``), or nesting deeper than
:data:`MAX_NESTING` (checked on the bytes before msgspec recurses, so the answer does not
depend on how deep the caller's stack happens to be).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

MAX_NESTING = 128  # arrays and objects inside one another, in one message

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

Id = str | int | float | None
NO_ID: Any = msgspec.UNSET  # marker: no ``id`` member, the request is a notification


class Request(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A valid request. Well-formed messages decode straight into it in one typed pass;
    anything else is judged member by member by :func:`parse_request`.

    Not tracked by the garbage collector (``gc=False``, cheaper to make and to drop): a
    request holds only what was decoded, never itself, so it is in no reference cycle.
    """

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
# What msgspec may raise on hostile bytes besides DecodeError: UnicodeDecodeError (a
# ValueError) for invalid UTF-8 in a string, RecursionError as a last resort.
_DECODE_ERRORS = (msgspec.DecodeError, ValueError, RecursionError)


class ParseError(ValueError):
    """The bytes are not one valid JSON value (or are nested too deeply)."""


# Depth is judged on the bytes, in C-level passes: strings (which may hold any bracket)
# are cut out and what is left of the brackets becomes a skeleton of "[" and "]".
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_SQUARE = bytes.maketrans(b"{}", b"[]")
_SIGNS = bytes.maketrans(b"[]", b"\x01\xff")
# Opening brackets (as "[") and newlines only: a line nesting deeper than MAX_NESTING
# leaves a run of more than MAX_NESTING "[" -- one translate and one substring search.
_OPENERS = bytes.maketrans(b"{", b"[")
_NOT_OPENER_OR_NL = bytes(b for b in range(256) if b not in b"[{\n")
_DEEP_RUN = b"[" * (MAX_NESTING + 1)
_JSON_SPACE = b" \t\r"  # JSON's whitespace but the line end
_PREFIX = 16 << 10


def _brackets(body: bytes) -> int:
    """Opening brackets in ``body``: an upper bound of its depth, in two C-level counts."""
    return body.count(b"[") + body.count(b"{")


def _skeleton(body: bytes, *, cut: bool = False) -> bytes:
    """The brackets outside strings, all as "[" and "]". With ``cut`` (a prefix), a string
    left open at the end is dropped with all that follows it."""
    if b'"' in body:
        body = _STRING.sub(b"", body)
        if cut:
            body = body.partition(b'"')[0]
    return body.translate(_SQUARE, _NOT_BRACKET)


def nesting_depth(body: bytes) -> int:
    """How deeply arrays and objects nest in ``body`` (exact for valid JSON)."""
    signs = _skeleton(body).translate(_SIGNS)
    return max(itertools.accumulate(memoryview(signs).cast("b")), default=0)


def _skeleton_too_deep(skeleton: bytes) -> bool:
    # Each pass removes every innermost pair, so valid JSON empties in exactly `depth`
    # passes; a bushy tree shrinks fast, a deep chain shows a run of "[" at once.
    for _ in range(MAX_NESTING + 1):
        if _DEEP_RUN in skeleton:
            return True
        if b"[]" not in skeleton:
            return skeleton.count(b"[") > MAX_NESTING  # brackets left open nest too
        skeleton = skeleton.replace(b"[]", b"")
    return True  # pairs still left after MAX_NESTING + 1 passes


def _too_deep(body: bytes) -> bool:
    # An attack nests deeply from the start: judge a prefix first (cheap), then the rest.
    if len(body) > _PREFIX and _skeleton_too_deep(_skeleton(body[:_PREFIX], cut=True)):
        return True
    return _skeleton_too_deep(_skeleton(body))


def _check_depth(body: bytes) -> None:
    if _brackets(body) > MAX_NESTING and _too_deep(body):
        raise ParseError(f"arrays and objects nested deeper than {MAX_NESTING} levels")


def decode_fast(frames: bytes | list[bytes]) -> list[Request] | None:
    """The requests of one read, if every message in it is a single well-formed request
    object; else None, and the caller judges message by message (:func:`decode`,
    :func:`parse_request`). The one quick way in, whatever the framing:

    - ``bytes``: a block of lines ending with a newline (line framing), decoded in one
      pass (:func:`_block`);
    - a list of bodies (LSP framing, or a single message): bodies without a newline are
      joined into such a block; others are decoded one by one (:func:`_one`).
    """
    if isinstance(frames, bytes):
        return _block(frames)
    if len(frames) == 1:
        one = _one(frames[0])
        return None if one is None else [one]
    block = b"\n".join(frames) + b"\n"
    if block.count(b"\n") == len(frames):
        return _block(block)
    requests = []
    for body in frames:
        request = _one(body)
        if request is None:
            return None
        requests.append(request)
    return requests


def _one(body: bytes) -> Request | None:
    if body[:1] != b"{" or _brackets(body) > MAX_NESTING:
        return None  # not an object, or possibly too deep: the careful path decides
    try:
        return _fast_decoder.decode(body)
    except _DECODE_ERRORS:
        return None


def _block(block: bytes) -> list[Request] | None:
    """The requests of a block of lines ending with a newline, if each line holds exactly
    one well-formed request object (and maybe whitespace); else None: then split it
    (:func:`~pokeralphd.protocol.framing.split_block`) and judge line by line.

    One ``decode_lines`` call for the whole block. It reads a stream of values, in which a
    line might hold two values, or a value run on over the next line, and the count still
    match the lines: so, with the whitespace taken out, every line must start with "{" and
    end with "}". A value cannot then run on past a line end (after a closing brace only
    a comma, a closing bracket or a new value may follow, and a line starting with "{" is
    none of the first two), hence each line holds at least one value, and as many values
    as lines means one each.
    """
    # A line with more opening brackets than MAX_NESTING might nest too deeply: that read
    # takes the careful path, body by body.
    if _DEEP_RUN in block.translate(_OPENERS, _NOT_OPENER_OR_NL):
        return None
    bare = block.translate(None, _JSON_SPACE)
    lines = bare.count(b"\n")
    if bare[:1] != b"{" or not bare.endswith(b"}\n") or bare.count(b"}\n{") != lines - 1:
        return None
    try:
        msgs = _fast_decoder.decode_lines(block)
    except _DECODE_ERRORS:
        return None
    return msgs if len(msgs) == lines else None


def decode(body: bytes) -> Any:
    """Parse one JSON value; raises :class:`ParseError` (only) for anything invalid."""
    _check_depth(body)
    try:
        return _decoder.decode(body)
    except _DECODE_ERRORS as exc:
        raise ParseError(str(exc)) from None


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


#: ``encode(message) -> bytes``: the encoder's own method, without a Python call around
#: it (this runs once per reply and per event).
encode = _encoder.encode
