"""A connection's replies as bytes, within the bounds every client gets.

- :meth:`ReplyEncoder.encode`: one reply's bytes; one that cannot be encoded becomes an
  internal error, one past ``max_reply`` a ``REPLY_TOO_LARGE`` error naming the size and
  the limit (with a hint), each by the request's id.
- :meth:`ReplyEncoder.batch`: a batch's reply within ``max_reply``: the items past the
  limit become such errors, so every request of the batch still gets an answer with its
  id; joined with one copy (:class:`BatchReply`, built item by item where a batch runs
  in time slices).
- :func:`invalid`: JSON-RPC's Invalid Request, with what was wrong.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode

log = logging.getLogger(__name__)
ENCODE_ERRORS = (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError)


def request_id(reply: dict[str, Any]) -> jsonrpc.Id:
    rid: jsonrpc.Id = reply.get("id")
    return rid


def invalid(rid: jsonrpc.Id, reason: str, **data: Any) -> dict[str, Any]:
    return jsonrpc.error_response(
        rid, ErrorCode.INVALID_REQUEST, "Invalid Request", {"detail": reason, **data}
    )


class ReplyEncoder:
    """One connection's replies to bytes (``label`` names the connection in the log)."""

    __slots__ = ("label", "max_reply")

    def __init__(self, label: str, max_reply: int) -> None:
        self.label = label
        self.max_reply = max_reply

    def encode(self, reply: dict[str, Any], *, log_too_large: bool = True) -> bytes:
        """One reply's bytes; an unencodable or oversized reply becomes an error."""
        rid = request_id(reply)
        try:
            body = jsonrpc.encode(reply)
        except ENCODE_ERRORS:
            log.exception("%s: a reply could not be encoded", self.label)
            return jsonrpc.encode(
                jsonrpc.error_response(
                    rid,
                    ErrorCode.INTERNAL_ERROR,
                    "Internal error",
                    {"detail": "the reply could not be encoded", "hint": "see the daemon log"},
                )
            )
        if len(body) > self.max_reply:
            return self.too_large(rid, len(body), log_it=log_too_large)
        return body

    def too_large(self, rid: jsonrpc.Id, size: int, *, log_it: bool = True) -> bytes:
        """The error that stands in for a reply of ``size`` bytes past ``max_reply``."""
        if log_it:
            log.info(
                "%s: a reply of %d bytes is past max_reply (%d); sent an error",
                self.label,
                size,
                self.max_reply,
            )
        return jsonrpc.encode(
            jsonrpc.error_response(
                rid,
                ErrorCode.REPLY_TOO_LARGE,
                f"the reply of {size} bytes exceeds the limit of {self.max_reply} bytes",
                {
                    "size": size,
                    "limit": self.max_reply,
                    "hint": "ask for less: use paging or limits, or split the batch",
                },
            )
        )

    def batch(self, replies: list[dict[str, Any]]) -> bytes:
        """A batch reply within max_reply (see :class:`BatchReply`)."""
        built = BatchReply(self)
        for reply in replies:
            built.add(reply)
        return built.join()


class BatchReply:
    """A batch's reply within max_reply: the items past the limit become errors, so every
    request still gets an answer with its id; joined with one copy."""

    __slots__ = ("encoder", "parts", "replaced", "total")

    def __init__(self, encoder: ReplyEncoder) -> None:
        self.encoder = encoder
        self.parts: list[bytes] = []
        self.total = 2
        self.replaced = 0

    def add(self, reply: dict[str, Any]) -> None:
        encoder = self.encoder
        body = encoder.encode(reply, log_too_large=False)
        if self.total + len(body) + 1 > encoder.max_reply:
            body = encoder.too_large(request_id(reply), len(body), log_it=False)
            self.replaced += 1
        self.parts += (body, b",")
        self.total += len(body) + 1

    def join(self) -> bytes:
        if self.replaced:
            log.info(
                "%s: %d replies of a batch past max_reply (%d) sent as errors",
                self.encoder.label,
                self.replaced,
                self.encoder.max_reply,
            )
        if not self.parts:
            return b"[]"
        pieces = [b"[", *self.parts]
        pieces[-1] = b"]"  # in place of the last separator
        return b"".join(pieces)
