"""One run of an ACP agent: ``initialize``, ``session/new`` in the working tree, one
``session/prompt`` with the task's prompt, the agent's requests answered meanwhile, and
``session/cancel`` when the run must stop (the runner then ends the agent's tree).

- ``initialize`` declares protocol version 1 and no client capability: we serve neither
  ``fs/*`` nor ``terminal/*`` (the agent reads, writes and runs commands itself, in the
  working tree it was started in, under the sandbox), so a request for one is answered
  "method not found". An agent that does not answer ``initialize`` within
  :data:`INIT_SECONDS` is given up on with an error saying so.
- ``session/request_permission`` is decided by the run's permission handler (the approval
  rules, then the policy: the inbox), the call's ``kind`` as the tool name and its
  ``rawInput`` as the input (:mod:`pokeralphd.agents.acp_map`); a planning run, which
  may change nothing, allows the reading kinds and rejects the rest without asking. A
  request that arrives once the run is stopping is answered ``cancelled``, as ACP asks.
- The ``session/prompt`` answer's ``stopReason`` becomes the run's result.

A failure (the agent ended, did not speak ACP, refused a request, asked for a login) is
the run's error result, never an exception.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio

from pokeralphd.agents.acp_map import READING_KINDS, ToolCalls, choose_option, result_of
from pokeralphd.agents.acp_rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    Incoming,
    Peer,
    PeerClosed,
    RpcError,
)
from pokeralphd.agents.base import (
    TEXT_TAIL,
    AgentChannel,
    AgentNotice,
    AgentPermissionDecision,
    AgentResult,
    AgentStarted,
    AgentText,
    Conversation,
    PermissionAnswer,
)

if TYPE_CHECKING:
    from pokeralphd.agents.base import AgentRequest

log = logging.getLogger(__name__)
PROTOCOL_VERSION = 1
INIT_SECONDS = 60.0  # for ``initialize`` (a CLI may take seconds to start: Node, bundles)
AUTH_REQUIRED = -32000  # ACP's "authentication required"
CLIENT_INFO = {"name": "pokeralph", "title": "pokeralph", "version": "1"}


class AcpConversation(Conversation):
    def __init__(
        self,
        request: AgentRequest,
        *,
        routed: bool,
        auth_hint: str,
        init_seconds: float | None = None,
    ) -> None:
        self.request = request
        self.routed = routed
        self.auth_hint = auth_hint
        self.init_seconds = INIT_SECONDS if init_seconds is None else init_seconds
        self.ended = False  # the agent's output ended
        self.calls = ToolCalls()
        self.session_id: str | None = None
        self.stopping = False
        # the turn's words, its pieces as streamed: the latest TEXT_TAIL characters (and the
        # last piece, however long), joined as the turn's result for judging
        self._texts: deque[str] = deque()
        self._chars = 0
        self._channel: AgentChannel | None = None
        self._asking: dict[int | str, None] = {}  # permission requests being decided
        self._left: list[Incoming] = []  # requests unanswered when the exchange ended
        self.peer = Peer(self._send, self._notification, self._notice)

    # -- the runner's side ---------------------------------------------------------------
    def receive(self, line: bytes) -> None:
        self.peer.receive(line)

    def closed(self) -> None:
        self.ended = True
        self.peer.close("the agent's output ended before it answered (it exited or closed stdout)")

    async def converse(self, channel: AgentChannel) -> None:
        self._channel = channel
        result: AgentResult | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._serve)
                tg.start_soon(self.peer.flush_replies)
                try:
                    result = await self._run()
                except PeerClosed as exc:
                    # An agent that ended (a crash) is told by its exit status and stderr;
                    # one that does not speak ACP, by what it printed.
                    if self.ended and not self.peer.violated:
                        self._notice(str(exc))
                    else:
                        result = self._failed(str(exc))
                except RpcError as exc:
                    result = self._failed(f"the agent answered with an error: {exc}")
                tg.cancel_scope.cancel()
        finally:
            self._left = self.peer.finish()
        if result is not None:
            channel.emit(result)

    async def stop(self, channel: AgentChannel) -> None:
        """``session/cancel``, every permission request still waiting answered cancelled."""
        self.stopping = True
        self._channel = channel
        if self.session_id is not None and not self.ended:
            with contextlib.suppress(OSError):
                await self.peer.notify("session/cancel", {"sessionId": self.session_id})
        left, self._left = [*self._left, *self.peer.finish()], []
        for incoming in left:
            await self._answer_stopped(incoming)
        asking, self._asking = list(self._asking), {}
        for msg_id in asking:
            await self.peer.respond(msg_id, {"outcome": {"outcome": "cancelled"}})

    # -- the exchange --------------------------------------------------------------------
    async def _run(self) -> AgentResult:
        init: Any = None
        with anyio.move_on_after(self.init_seconds):
            init = await self.peer.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": False, "writeTextFile": False},
                        "terminal": False,
                    },
                    "clientInfo": CLIENT_INFO,
                },
            )
        if init is None:
            return self._failed(
                f"the agent did not answer initialize within {self.init_seconds:g} s: is it "
                "an Agent Client Protocol agent started in its ACP mode?"
            )
        version = init.get("protocolVersion") if isinstance(init, dict) else None
        if version != PROTOCOL_VERSION:
            return self._failed(
                f"the agent speaks ACP protocol version {version!r}; pokeralph speaks "
                f"{PROTOCOL_VERSION}"
            )
        try:
            session = await self.peer.request(
                "session/new", {"cwd": str(self.request.cwd), "mcpServers": []}
            )
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED or "auth" in exc.message.lower():
                return self._failed(
                    f"the agent needs authentication: {exc.message} ({self.auth_hint})"
                )
            raise
        session_id = session.get("sessionId") if isinstance(session, dict) else None
        if not isinstance(session_id, str) or not session_id:
            return self._failed("the agent's session/new answer has no sessionId")
        self.session_id = session_id[:200]
        self._emit(AgentStarted(self.session_id, self.request.config.model, 0))
        answer = await self.peer.request(
            "session/prompt",
            {
                "sessionId": self.session_id,
                "prompt": [{"type": "text", "text": self.request.prompt}],
            },
        )
        return result_of(
            answer,
            self.session_id,
            self.calls.cost_usd,
            "".join(self._texts),
            self.calls.usage,
        )

    async def _serve(self) -> None:
        """Answer the agent's requests, each in a task of its own (a permission may wait
        for a person while the agent asks something else)."""
        async with anyio.create_task_group() as tg:
            async for incoming in self.peer.requests:
                tg.start_soon(self._answer, incoming)

    async def _answer(self, incoming: Incoming) -> None:
        if self.stopping:
            await self._answer_stopped(incoming)
            return
        if incoming.method != "session/request_permission":
            await self.peer.error(
                incoming.id,
                METHOD_NOT_FOUND,
                f"{incoming.method[:100]} is not offered by pokeralph",
            )
            return
        try:
            ask = self.calls.permission_request(incoming.id, incoming.params)
        except ValueError as exc:
            await self.peer.error(incoming.id, INVALID_PARAMS, str(exc))
            return
        options = incoming.params.get("options") if isinstance(incoming.params, dict) else None
        self._asking[incoming.id] = None
        try:
            if self.routed:
                assert self._channel is not None
                answer = await self._channel.ask(ask)
            else:
                allow = ask.tool_name in READING_KINDS
                answer = PermissionAnswer(
                    allow, "" if allow else "a planning run changes nothing", method="auto"
                )
                self._emit(AgentPermissionDecision(ask, answer))
        except Exception as exc:  # a bug deciding must not leave the agent waiting
            log.exception("deciding an ACP permission request failed")
            self._asking.pop(incoming.id, None)
            await self.peer.error(incoming.id, INTERNAL_ERROR, f"pokeralph could not decide: {exc}")
            return
        # Still waiting for its answer? (Cancelled, a request stays for stop() to answer.)
        pending = incoming.id in self._asking
        self._asking.pop(incoming.id, None)
        if pending:
            outcome = {"outcome": "cancelled"} if self.stopping else choose_option(options, answer)
            await self.peer.respond(incoming.id, {"outcome": outcome})

    async def _answer_stopped(self, incoming: Incoming) -> None:
        if incoming.method == "session/request_permission":
            await self.peer.respond(incoming.id, {"outcome": {"outcome": "cancelled"}})
        else:
            await self.peer.error(incoming.id, METHOD_NOT_FOUND, "the run is stopping")

    # -- helpers ---------------------------------------------------------------------------
    async def _send(self, data: bytes) -> None:
        if self._channel is not None:
            await self._channel.send(data)

    def _notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            self._notice(f"notification {method[:100]!r} not handled")
            return
        for event in self.calls.update(params):
            if isinstance(event, AgentText):
                self._texts.append(event.text)
                self._chars += len(event.text)
                while self._chars > TEXT_TAIL and len(self._texts) > 1:
                    self._chars -= len(self._texts.popleft())
            self._emit(event)

    def _notice(self, text: str) -> None:
        self._emit(AgentNotice(text))

    def _emit(self, event: Any) -> None:
        if self._channel is not None:
            self._channel.emit(event)

    def _failed(self, message: str) -> AgentResult:
        return AgentResult(
            text=message,
            is_error=True,
            subtype="error",
            cost_usd=self.calls.cost_usd,
            usage=None,
            num_turns=None,
            duration_ms=None,
            session_id=self.session_id,
        )
