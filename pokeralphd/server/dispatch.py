"""The method table and the dispatcher that turns message bodies into replies.

A handler is ``async def handler(ctx, params) -> result``; params arrive decoded into the
method's msgspec struct (by name or by position), and the result is a value of the type
the method registered (``pokeralphd.protocol.results``), encoded as it is. Errors become JSON-RPC error objects:
:class:`PokeralphError` keeps its code and data, a decode problem names the field, and
anything unexpected is logged and reported as -32603 without killing the connection.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec

from pokeralphd.domain.ids import (
    DELIVERY_ID_PATTERN,
    TASK_ID_PATTERN,
    InvalidId,
    wire_pattern,
)
from pokeralphd.domain.statuses import IllegalTransition
from pokeralphd.errors import InvalidParams, OutOfScope, PokeralphError
from pokeralphd.protocol import events as ev
from pokeralphd.protocol import jsonrpc
from pokeralphd.protocol.codes import ErrorCode
from pokeralphd.protocol.openrpc import openrpc_document
from pokeralphd.protocol.params import NO_NUL

if TYPE_CHECKING:
    from pokeralphd.protocol.params import Params
    from pokeralphd.server.context import CallContext

log = logging.getLogger(__name__)
#: ``async def handler(ctx, params)``, or a plain ``def`` for a method that never waits
#: (``daemon.ping``): the dispatcher then calls it without making a coroutine.
Handler = Callable[["CallContext", Any], Awaitable[Any]] | Callable[["CallContext", Any], Any]


@dataclass(frozen=True)
class Method:
    name: str
    handler: Handler
    params: type[Params]
    summary: str
    result: Any  # the msgspec type of the result (a results struct, a list or a literal)
    concurrent: bool = False  # may wait a long time: run beside the connection's reader
    agent: bool = False  # an agent's connection may call it (for its own repository and task)
    sync: bool = False  # the handler is a plain function (see Handler)


class MethodTable:
    def __init__(self) -> None:
        self.methods: dict[str, Method] = {}
        self._discover: msgspec.Raw | None = None
        self._building: anyio.Event | None = None

    def discover(self) -> dict[str, Any]:
        """The OpenRPC document of every method."""
        return openrpc_document(self.methods.values())

    async def discover_encoded(self) -> msgspec.Raw:
        """The OpenRPC document, encoded. It never changes once the daemon serves, so it
        is built once (~50 ms), in a worker thread so other clients are served meanwhile,
        and once however many ask at the same time."""
        while self._discover is None:
            if self._building is not None:
                await self._building.wait()
                continue  # built (or the build failed: then try again)
            building = self._building = anyio.Event()
            try:
                document = await anyio.to_thread.run_sync(self.discover)
                self._discover = msgspec.Raw(jsonrpc.encode(document))
            finally:
                self._building = None
                building.set()
        return self._discover

    def add(
        self,
        name: str,
        params: type[Params],
        summary: str,
        *,
        result: Any,
        concurrent: bool = False,
        agent: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Register a handler for ``name``, taking ``params`` and returning ``result``.

        ``agent`` lets an agent's connection call it too; such a handler must keep the
        agent to its own repository and task (``CallContext.own_repo``/``own_task``)."""

        def decorate(handler: Handler) -> Handler:
            if name in self.methods:
                raise ValueError(f"method {name} registered twice")
            # Plain only if neither the handler nor what it wraps is async (a decorator's
            # wrapper may be either around the other).
            sync = not (
                inspect.iscoroutinefunction(handler)
                or inspect.iscoroutinefunction(inspect.unwrap(handler))
            )
            if sync and concurrent:
                raise ValueError(f"method {name}: a synchronous handler cannot be concurrent")
            self.methods[name] = Method(
                name, handler, params, summary, result, concurrent, agent, sync
            )
            self._discover = None
            return handler

        return decorate


_FIELD_AT = re.compile(r"at `\$\.?([^`]*)`$")
_MISSING = re.compile(r"missing required field `([^`]+)`")
_REGEX = re.compile(r"`str` matching regex '(.*)'(?= - at `)", re.DOTALL)
# What a pattern means, for people: msgspec's message quotes the regex (its repr) instead.
_PATTERN_MEANS = {
    repr(pattern)[1:-1]: meaning
    for pattern, meaning in (
        (wire_pattern(TASK_ID_PATTERN), "a task id NNN-slug (ASCII digits, like 001-setup)"),
        (wire_pattern(DELIVERY_ID_PATTERN), "a delivery id like d_1732300000_001"),
        (NO_NUL, "text without a NUL byte"),
    )
}


def _field_from(message: str) -> str | None:
    """The param a msgspec validation message is about (``acceptanceCriteria[2]``)."""
    match = _MISSING.search(message)
    if match:
        base = _FIELD_AT.search(message)
        prefix = base.group(1) + "." if base and base.group(1) else ""
        return prefix + match.group(1)
    match = _FIELD_AT.search(message)
    return match.group(1) if match else None


def _readable(message: str) -> str:
    match = _REGEX.search(message)
    meaning = _PATTERN_MEANS.get(match.group(1)) if match else None
    if match is None or meaning is None:
        return message
    return message[: match.start()] + meaning + message[match.end() :]


def decode_params(method: Method, raw: list[Any] | dict[str, Any] | None) -> Params:
    """Params by name or by position into the method's struct, or :class:`PokeralphError`.

    Every failure is :class:`InvalidParams` with ``data.field`` naming the param (and the
    item, as in ``acceptanceCriteria[2]``); the limits are the struct's own (``params.py``).
    """
    fields = method.params.__struct_encode_fields__
    if raw is None:
        raw = {}
    if isinstance(raw, list):
        if len(raw) > len(fields):
            raise InvalidParams(
                f"{method.name} takes at most {len(fields)} positional params, got {len(raw)}",
                expected=list(fields),
            )
        raw = dict(zip(fields, raw, strict=False))
    else:
        # Named here rather than read back from msgspec's message: a key may hold any
        # character, a backtick or nothing at all.
        unknown = next((key for key in raw if key not in fields), None)
        if unknown is not None:
            raise InvalidParams(
                f"{method.name}: unknown param {unknown!r}", field=unknown, expected=list(fields)
            )
    try:
        return msgspec.convert(raw, method.params)
    except msgspec.ValidationError as exc:
        message = _readable(str(exc))
        raise InvalidParams(f"{method.name}: {message}", field=_field_from(message)) from exc


# The param an id of each kind arrives in, when the raiser does not say (InvalidId.field).
_ID_PARAMS = {"task": "taskId", "delivery": "id"}


class Dispatcher:
    def __init__(self, table: MethodTable) -> None:
        self.table = table
        self.refusals = RefusalLog()
        # Params structs of methods called without params, decoded once (they are never mutated).
        self._no_params: dict[str, Params] = {}
        self._kinds: tuple[int, frozenset[str], frozenset[str]] | None = None

    def method_kinds(self) -> tuple[frozenset[str], frozenset[str]]:
        """The names of the concurrent methods (run beside a connection's reader) and of
        the synchronous ones (:meth:`call_now` runs them): made once per set of methods
        (methods are only ever added), read by every new connection."""
        methods = self.table.methods
        if self._kinds is None or self._kinds[0] != len(methods):
            concurrent = frozenset(m.name for m in methods.values() if m.concurrent)
            sync = frozenset(m.name for m in methods.values() if m.sync)
            self._kinds = (len(methods), concurrent, sync)
        return self._kinds[1], self._kinds[2]

    async def call(self, request: jsonrpc.Request, ctx: CallContext) -> dict[str, Any] | None:
        """Run one request; the response dict, or None for a notification."""
        method = self.table.methods.get(request.method)
        if method is None:
            return self._not_found(request)
        if method.sync:
            return self.call_now(request, ctx)
        try:
            result = await method.handler(ctx, self._params(method, request, ctx))
        except Exception as exc:
            return self._failed(request, ctx, exc)
        return self._result(request, result)

    def call_now(self, request: jsonrpc.Request, ctx: CallContext) -> dict[str, Any] | None:
        """:meth:`call` for a synchronous method (see :meth:`method_kinds`), without a
        coroutine (the hot path of a client pipelining pings)."""
        method = self.table.methods[request.method]
        try:
            result = method.handler(ctx, self._params(method, request, ctx))
        except Exception as exc:
            return self._failed(request, ctx, exc)
        return self._result(request, result)

    @staticmethod
    def _result(request: jsonrpc.Request, result: Any) -> dict[str, Any] | None:
        if request.is_notification:
            return None
        return jsonrpc.result_response(_rid(request), result)

    def _params(self, method: Method, request: jsonrpc.Request, ctx: CallContext) -> Params:
        """The request's params as the method's struct, once it may be called at all."""
        if ctx.scope is not None and not method.agent:
            raise OutOfScope(ctx.scope, f"{method.name} is not for agents", method.name)
        raw = request.params_or_none
        if raw is None:
            params = self._no_params.get(method.name)
            if params is None:
                params = self._no_params[method.name] = decode_params(method, None)
            return params
        return decode_params(method, raw)

    def _not_found(self, request: jsonrpc.Request) -> dict[str, Any] | None:
        if request.is_notification:
            return None
        return jsonrpc.error_response(
            _rid(request),
            ErrorCode.METHOD_NOT_FOUND,
            "Method not found",
            {"method": request.method, "hint": "call rpc.discover for the list of methods"},
        )

    def _failed(
        self, request: jsonrpc.Request, ctx: CallContext, exc: Exception
    ) -> dict[str, Any] | None:
        """The error reply for what a call raised (None for a notification); a bug is
        logged and answered as an internal error, and the connection goes on."""
        if isinstance(exc, OutOfScope):
            self.refusals.record(ctx, request.method, exc)
        if not isinstance(exc, PokeralphError | InvalidId | IllegalTransition):
            log.error("internal error in %s", request.method, exc_info=exc)
        if request.is_notification:
            return None
        rid = _rid(request)
        if isinstance(exc, PokeralphError):
            return jsonrpc.error_response(rid, exc.code, exc.message, exc.data or None)
        if isinstance(exc, InvalidId):
            data = {"field": exc.field or _ID_PARAMS.get(exc.kind, exc.kind + "Id")}
            if exc.value is not None:
                data["value"] = str(exc.value)
            return jsonrpc.error_response(rid, ErrorCode.INVALID_PARAMS, str(exc), data)
        if isinstance(exc, IllegalTransition):
            return jsonrpc.error_response(
                rid,
                ErrorCode.ILLEGAL_TRANSITION,
                str(exc),
                {"from": exc.old, "to": exc.new, "kind": exc.kind},
            )
        return jsonrpc.error_response(
            rid,
            ErrorCode.INTERNAL_ERROR,
            "Internal error",
            {"method": request.method, "hint": "see the daemon log"},
        )


def _rid(request: jsonrpc.Request) -> jsonrpc.Id:
    return None if isinstance(request.id, msgspec.UnsetType) else request.id


REFUSALS_PER_MINUTE = 60  # refusals recorded one by one; past it, only counted


class RefusalLog:
    """Records what agents were refused: a log line and an ``agent_refused`` event each,
    at most :data:`REFUSALS_PER_MINUTE` a minute, so a looping agent cannot flood the log
    and the event stream (the rest are counted, and the count is logged)."""

    def __init__(self) -> None:
        self.window = 0.0
        self.recorded = 0
        self.skipped = 0

    def record(self, ctx: CallContext, method: str, exc: OutOfScope) -> None:
        scope = ctx.scope
        assert scope is not None
        now = time.monotonic()
        if now - self.window >= 60:
            if self.skipped:
                log.warning("%d more agent requests were refused", self.skipped)
            self.window, self.recorded, self.skipped = now, 0, 0
        if self.recorded >= REFUSALS_PER_MINUTE:
            self.skipped += 1
            return
        self.recorded += 1
        pid = getattr(ctx.conn, "peer_pid", None)
        log.warning("refused %s from %s (pid %s): %s", method, scope.describe(), pid, exc.message)
        ctx.services.bus.publish(
            ev.AgentRefused(method=method[:200], kind=scope.kind, pid=pid, reason=exc.message),
            scope.repo,
            scope.task_id,
        )
