"""The ACP methods: ``initialize``, ``session/new``, ``session/prompt``, ``session/cancel``.

A session is a repository (its ``cwd``, registered on first use). A prompt is one turn,
run on a thread of its own so that the reader stays free for ``session/cancel`` and for
the editor's answers to our questions. What a prompt does (the rule, also in the README):

- ``plan: IDEA`` (or ``/plan IDEA``): plan a PRD from the idea (``planning.start``); the
  planner's questions end the turn, and while it waits for answers the next prompt is the
  answer (``planning.answer``); the PRD it completes is merged into the repository's;
- ``run TASK-ID`` (or ``start TASK-ID``): run that task's battle;
- anything else is a new task (a leading ``add a task:`` or ``task:`` is dropped): its
  first line is the title, the whole text its description, its bullet lines (``-``,
  ``*``, ``1.``) its acceptance criteria (none: one criterion, that the request is done);
  the task is added (``task.create``) and its battle started.

The turn streams the battle (:mod:`pokeralph_acp.updates`), puts every inbox item of the
task to the editor (:mod:`pokeralph_acp.asks`) and answers the prompt when the battle
ends: ``end_turn`` when it completed, failed or paused, ``cancelled`` after
``session/cancel`` (which pauses it at once: ``battle.pause`` with ``now``). Closing the
editor ends this process, not the battle: the daemon runs it on.
"""

from __future__ import annotations

import re
import threading
import uuid

from pokeralph_acp import asks, updates
from pokeralph_acp.prompts import prompt_text, task_of
from pokeralph_acp.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PeerClosed,
    RpcError,
)
from pokeralphctl import __version__, codes
from pokeralphctl.client import DaemonNotRunning, EventCursor, RequestFailed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pokeralph_acp.daemon import Daemon
    from pokeralph_acp.wire import Peer

PROTOCOL_VERSION = 1
MAX_SESSIONS = 32
#: Inbox questions of one turn asked of the editor at once (more: shown as messages).
MAX_ASKS = 8
#: The longest prompt text made into a task.
MAX_PROMPT = 100_000
#: How often one turn subscribes again after the daemon dropped its connection.
MAX_RECONNECTS = 5
#: Seconds between looks at a turn's state while no event arrives.
TICK = 0.5

RUN = re.compile(r"^\s*/?(?:run|start)\s+((?:[0-9]{3}|[1-9][0-9]{3,})-[a-z0-9-]+)\s*$", re.I)
PLAN = re.compile(r"^\s*/?plan\s*:?\s+(\S.*)$", re.I | re.S)
PLANNING = ["planning_output", "planning_question", "planning_completed", "planning_failed"]
TERMINAL = ("battle_complete", "battle_failed", "battle_cancelled", "battle_paused")


class Turn:
    """One prompt's battle: what cancel needs to find."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        #: the pause could not be asked (no battle yet, or already over): end as cancelled
        self.stop = threading.Event()
        self.task_id: str | None = None
        self.asking = threading.BoundedSemaphore(MAX_ASKS)


class Session:
    def __init__(self, sid: str, repo: str, path: str) -> None:
        self.id = sid
        self.repo = repo
        self.path = path
        self.turn: Turn | None = None
        self.lock = threading.Lock()
        self.turns = 0


class Agent:
    """pokeralph on the editor's side of ACP, a client of the daemon on the other."""

    def __init__(self, peer: Peer, daemon: Daemon) -> None:
        self.peer = peer
        self.daemon = daemon
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._opening: list[threading.Thread] = []

    def drain(self, timeout: float) -> None:
        """After stdin ended: let the ``session/new`` calls under way answer (a prompt's
        turn is not waited for: its battle goes on in the daemon)."""
        for thread in self._opening:
            thread.join(timeout)

    # -- dispatch (on the reading thread: quick, or handed to a thread)
    def on_message(self, method: str, params: Any, rid: Any) -> None:
        if rid is None:
            if method == "session/cancel":
                self._cancel(params)
            return  # other notifications: nothing to do, nothing to answer
        if params is not None and not isinstance(params, dict):
            self.peer.fail(rid, INVALID_PARAMS, "params must be an object", {"field": "params"})
            return
        params = params or {}
        quick = {"initialize": self.initialize, "authenticate": lambda p: {}}
        slow = {"session/new": self.new_session, "session/prompt": self.prompt}
        if method in quick:
            self._answer(rid, quick[method], params)
        elif method in slow:
            thread = threading.Thread(
                target=self._answer, args=(rid, slow[method], params), daemon=True
            )
            if method == "session/new":
                self._opening = [t for t in self._opening if t.is_alive()]
                self._opening.append(thread)
            thread.start()
        else:
            self.peer.fail(rid, METHOD_NOT_FOUND, f"pokeralph-acp does not offer {method}")

    def _answer(self, rid: Any, handler: Any, params: dict[str, Any]) -> None:
        try:
            result = handler(params)
        except RpcError as exc:
            self.peer.fail(rid, exc.code, exc.message, exc.data)
        except DaemonNotRunning as exc:
            self.peer.fail(rid, INTERNAL_ERROR, str(exc), {"socket": exc.path})
        except RequestFailed as exc:
            self.peer.fail(rid, exc.code, f"pokeralphd: {exc.message}", exc.data)
        except Exception as exc:  # a bug of ours: say it, keep serving
            self.peer.fail(rid, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        else:
            self.peer.reply(rid, result)

    # -- methods
    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """Invoked for ``initialize``: our protocol version and what we can do."""
        version = params.get("protocolVersion")
        if type(version) is not int:
            raise RpcError(
                INVALID_PARAMS, "protocolVersion must be an integer", {"field": "protocolVersion"}
            )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "authMethods": [],
            "agentInfo": {"name": "pokeralph", "title": "pokeralph", "version": __version__},
        }

    def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        """Invoked for ``session/new``: the repository of ``cwd``, registered if new.
        ``mcpServers`` are accepted and not used: a battle's agent runs with the tools
        its repository's config gives it."""
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RpcError(INVALID_PARAMS, "cwd must be a path", {"field": "cwd"})
        servers = params.get("mcpServers", [])
        if not isinstance(servers, list):
            raise RpcError(INVALID_PARAMS, "mcpServers must be a list", {"field": "mcpServers"})
        with self._lock:
            if len(self.sessions) >= MAX_SESSIONS:
                raise RpcError(INVALID_REQUEST, f"at most {MAX_SESSIONS} sessions at once")
        self.daemon.ensure()
        repo = self.daemon.repository(cwd)
        session = Session(uuid.uuid4().hex, str(repo["name"]), str(repo["path"]))
        with self._lock:
            if len(self.sessions) >= MAX_SESSIONS:
                raise RpcError(INVALID_REQUEST, f"at most {MAX_SESSIONS} sessions at once")
            self.sessions[session.id] = session
        return {"sessionId": session.id}

    def _session(self, params: Any) -> Session:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        with self._lock:
            session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise RpcError(INVALID_PARAMS, f"no session {sid!r}", {"field": "sessionId"})
        return session

    def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        """Invoked for ``session/prompt``: one turn (see the module doc)."""
        session = self._session(params)
        text = prompt_text(params.get("prompt"))
        turn = Turn()
        with session.lock:
            if session.turn is not None:
                raise RpcError(INVALID_REQUEST, "a prompt is still running in this session")
            session.turn = turn
            session.turns += 1
            number = session.turns
        try:
            return {"stopReason": self._turn(session, turn, number, text)}
        finally:
            with session.lock:
                session.turn = None

    def _cancel(self, params: Any) -> None:
        """Invoked for ``session/cancel``: pause the turn's battle at once."""
        try:
            session = self._session(params)
        except RpcError:
            return  # a notification gets no answer, not even an error
        turn = session.turn
        if turn is None or turn.cancelled.is_set():
            return
        turn.cancelled.set()
        threading.Thread(target=self._pause, args=(session, turn), daemon=True).start()

    def _pause(self, session: Session, turn: Turn) -> None:
        if turn.task_id is None:
            turn.stop.set()  # the turn pauses the battle itself if it starts one
            return
        try:
            self.daemon.call(
                "battle.pause", {"now": True, "taskId": turn.task_id, "repo": session.repo}
            )
        except (RequestFailed, DaemonNotRunning, OSError):
            turn.stop.set()  # nothing to pause (it ended, or the daemon is gone)

    # -- a turn
    def _say(self, session: Session, update: dict[str, Any]) -> None:
        self.peer.notify("session/update", {"sessionId": session.id, "update": update})

    def _turn(self, session: Session, turn: Turn, number: int, text: str) -> str:
        if not text.strip():
            self._say(session, updates.message(HELP))
            return "end_turn"
        if len(text) > MAX_PROMPT:
            raise RpcError(
                INVALID_PARAMS, f"a prompt of at most {MAX_PROMPT} characters", {"field": "prompt"}
            )
        plan = PLAN.match(text)
        if plan:
            return self._planning(session, turn, number, "planning.start", {"idea": plan[1]})
        status = self.daemon.call("planning.status", {"repo": session.repo})
        if status.get("state") == "waiting_input":
            return self._planning(session, turn, number, "planning.answer", {"answer": text})
        run = RUN.match(text)
        if run:
            task_id = run.group(1).lower()
            try:
                task = self.daemon.call("task.get", {"taskId": task_id, "repo": session.repo})
            except RequestFailed as exc:
                if exc.code != codes.TASK_NOT_FOUND:
                    raise
                self._say(
                    session, updates.message(f"There is no task {task_id} in {session.repo}.")
                )
                return "end_turn"
            title = task.get("title", "")
        else:
            title, description, criteria = task_of(text)
            created = self.daemon.call(
                "task.create",
                {
                    "title": title,
                    "description": description,
                    "acceptanceCriteria": criteria,
                    "repo": session.repo,
                },
            )
            task_id = created["task"]["id"]
            self._say(session, updates.message(f"Added task **{task_id}**: {title}\n\n"))
        return self._battle(session, turn, number, task_id, title)

    def _battle(self, session: Session, turn: Turn, number: int, task_id: str, title: str) -> str:
        cursor = EventCursor()
        translator = updates.Translator(f"t{number}")
        started = False
        for _ in range(MAX_RECONNECTS + 1):
            with self.daemon.connect() as conn:
                conn.subscribe(cursor, repo=session.repo)
                if cursor.restarted:
                    self._say(session, updates.message("\n\n> the daemon restarted\n\n"))
                conn.settimeout(TICK)  # from now on: wake up to look at the turn's state
                if not started:
                    started = True
                    if turn.cancelled.is_set():
                        return "cancelled"
                    self._say(session, updates.message(self._start(session, task_id)))
                    turn.task_id = task_id
                    if turn.cancelled.is_set():
                        self._pause(session, turn)
                end = self._follow(session, turn, conn, cursor, translator, task_id)
                if end is not None:
                    for update in translator.close():
                        self._say(session, update)
                    return end
            # the daemon closed the connection (an overflow, a restart): subscribe again
        raise RpcError(INTERNAL_ERROR, f"lost the daemon's events {MAX_RECONNECTS + 1} times")

    def _start(self, session: Session, task_id: str) -> str:
        """Start the task's battle, resume it if paused, or follow it if it runs."""
        params = {"taskId": task_id, "repo": session.repo}
        try:
            self.daemon.call("battle.start", params)
        except RequestFailed as exc:
            if exc.code != codes.BATTLE_ACTIVE:
                raise
            status = exc.data.get("status") if isinstance(exc.data, dict) else None
            if status is not None:
                return f"Following the battle of **{task_id}** ({status}).\n\n"
            self.daemon.call("battle.resume", params)  # paused: the one case without status
            return f"Battle of **{task_id}** resumed.\n\n"
        return f"Battle of **{task_id}** started.\n\n"

    def _follow(
        self,
        session: Session,
        turn: Turn,
        conn: Any,
        cursor: EventCursor,
        translator: updates.Translator,
        task_id: str,
    ) -> str | None:
        """Follow the events until the battle ends (its stop reason) or the connection
        drops (None)."""
        while True:
            try:
                for message in conn.messages():
                    if message.get("method") != "event":
                        continue
                    event = message.get("params") or {}
                    if not cursor.advance(event) or not mine(event, task_id):
                        continue
                    end = self._event(session, turn, translator, event)
                    if end is not None:
                        return end
                return None
            except TimeoutError:
                if self.peer.closed.is_set():
                    return "cancelled"
                if turn.stop.is_set():
                    return "cancelled"

    def _event(
        self, session: Session, turn: Turn, translator: updates.Translator, event: dict[str, Any]
    ) -> str | None:
        for update in translator.event(event):
            self._say(session, update)
        kind = event.get("type")
        payload = event.get("payload") or {}
        if kind == "new_delivery":
            delivery = payload.get("delivery") or {}
            if delivery.get("mode") != "passive":
                self._ask(session, turn, delivery)
            return None
        line = ending(kind, payload)
        if line:
            self._say(session, updates.message(line))
        if kind == "battle_paused":
            return "cancelled" if turn.cancelled.is_set() else "end_turn"
        if kind == "battle_cancelled":
            return "cancelled"
        if kind in TERMINAL:
            return "end_turn"
        return None

    # -- planning
    def _planning(
        self, session: Session, turn: Turn, number: int, method: str, params: dict[str, Any]
    ) -> str:
        """Start planning or answer its questions, and follow it until it asks again, ends
        or fails. A PRD it completes is merged into the repository's (new tasks added).
        Cancel ends the turn only: planning goes on in the daemon (``pokeralphctl plan``)."""
        translator = updates.Translator(f"t{number}")
        with self.daemon.connect() as conn:
            conn.subscribe(repo=session.repo, types=PLANNING)
            self.daemon.call(method, {**params, "repo": session.repo})
            conn.settimeout(TICK)
            while True:
                try:
                    for message in conn.messages():
                        if message.get("method") == "event":
                            end = self._planned(session, translator, message.get("params") or {})
                            if end is not None:
                                return end
                    raise RpcError(INTERNAL_ERROR, "the daemon closed the connection")
                except TimeoutError:
                    if turn.cancelled.is_set() or self.peer.closed.is_set():
                        return "cancelled"

    def _planned(
        self, session: Session, translator: updates.Translator, event: dict[str, Any]
    ) -> str | None:
        kind = event.get("type")
        payload = event.get("payload") or {}
        if kind == "planning_output":
            for update in translator.output(payload):
                self._say(session, update)
            return None
        for update in translator.close():
            self._say(session, update)
        if kind == "planning_question":
            asked = "\n\n".join(f"- {q}" for q in payload.get("questions") or [])
            self._say(
                session,
                updates.message(
                    f"\n\n**The planner asks:**\n\n{asked or payload.get('question')}\n\n"
                    "Answer in your next prompt."
                ),
            )
            return "end_turn"
        if kind == "planning_failed":
            self._say(session, updates.message(f"\n\n**Planning failed**: {payload.get('error')}"))
            return "end_turn"
        if kind != "planning_completed":
            return None
        if not payload.get("valid"):
            problems = "\n".join(f"- {p}" for p in payload.get("problems") or [])
            self._say(session, updates.message(f"\n\n**The PRD draft has problems:**\n{problems}"))
            return "end_turn"
        before = {t.get("id") for t in self._tasks(session)}
        self.daemon.call("planning.finish", {"save": True, "merge": "merge", "repo": session.repo})
        added = [t for t in self._tasks(session) if t.get("id") not in before]
        lines = "\n".join(f"- **{t['id']}**: {t.get('title', '')}" for t in added)
        self._say(
            session,
            updates.message(
                f"\n\n**Planned.** Tasks added to the PRD:\n\n{lines or '(none new)'}\n\n"
                "Say `run TASK-ID` to run one."
            ),
        )
        return "end_turn"

    def _tasks(self, session: Session) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = self.daemon.call("task.list", {"repo": session.repo})["tasks"]
        return tasks

    # -- inbox items
    def _ask(self, session: Session, turn: Turn, delivery: dict[str, Any]) -> None:
        ask = asks.ask_for(delivery)
        if ask is None or not turn.asking.acquire(blocking=False):
            self._say(session, updates.message(asks.message_for(delivery, session.repo)))
            return
        threading.Thread(
            target=self._asking, args=(session, turn, delivery, ask), daemon=True
        ).start()

    def _asking(
        self, session: Session, turn: Turn, delivery: dict[str, Any], ask: asks.Ask
    ) -> None:
        try:
            self._put(session, turn, delivery, ask)
        finally:
            turn.asking.release()

    def _put(self, session: Session, turn: Turn, delivery: dict[str, Any], ask: asks.Ask) -> None:
        call_id = f"inbox-{delivery.get('id')}"
        source = delivery.get("source") or {}
        tool_call = {
            "toolCallId": call_id,
            "title": str(delivery.get("title") or "pokeralph asks"),
            "kind": "execute" if source.get("kind") == "permission" else "other",
            "status": "pending",
            "content": [{"type": "content", "content": updates.text_block(asks.body_of(delivery))}],
        }
        self._say(session, {"sessionUpdate": "tool_call", **tool_call})
        try:
            result = self.peer.request(
                "session/request_permission",
                {"sessionId": session.id, "toolCall": tool_call, "options": ask.options},
                turn.cancelled,
            )
        except PeerClosed:
            return
        except RpcError as exc:
            self._say(
                session,
                updates.message(
                    f"The editor could not ask ({exc.message}).\n\n"
                    + asks.message_for(delivery, session.repo)
                ),
            )
            return
        outcome = result.get("outcome") if isinstance(result, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            self._finish_call(session, call_id, "failed", "Left unanswered.")
            return
        values = ask.answers.get(chosen) if isinstance(chosen, str) else None
        if values is None:
            self._finish_call(session, call_id, "failed", f"Not one of the options: {chosen!r}.")
            return
        name = next(o["name"] for o in ask.options if o["optionId"] == chosen)
        try:
            self.daemon.call(
                "inbox.answer", {"id": delivery["id"], "values": values, "repo": session.repo}
            )
        except (RequestFailed, DaemonNotRunning) as exc:
            self._finish_call(session, call_id, "failed", f"Not answered: {exc}")
            return
        self._finish_call(session, call_id, "completed", f"Answered: {name}")

    def _finish_call(self, session: Session, call_id: str, status: str, text: str) -> None:
        self._say(
            session,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": status,
                "content": [{"type": "content", "content": updates.text_block(text)}],
            },
        )


HELP = (
    "Tell me what to build: the prompt becomes a task of this repository and its battle runs "
    "here (its first line is the title, bullet lines its acceptance criteria). "
    "`run TASK-ID` runs an existing task."
)


def mine(event: dict[str, Any], task_id: str) -> bool:
    """Whether ``event`` belongs to the battle of ``task_id`` (its inbox items included)."""
    if event.get("taskId") == task_id:
        return True
    payload = event.get("payload")
    if isinstance(payload, dict):
        if payload.get("taskId") == task_id:
            return True
        delivery = payload.get("delivery")
        if isinstance(delivery, dict):
            return bool((delivery.get("source") or {}).get("taskId") == task_id)
    return False


def ending(kind: Any, payload: dict[str, Any]) -> str | None:
    """A line for the events that end, stop or hold up a battle."""
    if kind == "battle_complete":
        cost = payload.get("costUsd")
        return (
            f"\n\n**Battle complete** after {payload.get('iterations')} iteration(s)"
            + (f", ${cost:.4f}" if isinstance(cost, int | float) else "")
            + ".\n"
        )
    if kind == "battle_failed":
        return f"\n\n**Battle failed**: {payload.get('error')}\n"
    if kind == "battle_cancelled":
        return "\n\n**Battle cancelled.**\n"
    if kind == "battle_paused":
        return (
            f"\n\n**Battle paused** ({payload.get('reason') or 'paused'}). "
            f"Resume it with `pokeralphctl battle resume {payload.get('taskId')}`, "
            f"or say `run {payload.get('taskId')}`.\n"
        )
    if kind == "battle_blocked":
        return f"\n\n> blocked by a transient failure; retrying at {payload.get('retryAt')}\n\n"
    if kind == "battle_escalated":
        return "\n\n**The battle needs a decision** (asked below).\n\n"
    return None
