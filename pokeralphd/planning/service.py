"""PlanService: per repository, one planning session at a time.

The session (``domain.planning.PlanningSession``) says where it stands; each agent turn
runs in plan mode, resumed by session id, and its questions become an inbox item.
``planning.finish`` validates the draft and saves it only when asked.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import anyio

from pokeralph_core import documents
from pokeralph_core.documents import DocumentKind
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import (
    AgentEvent,
    AgentLines,
    AgentRequest,
    AgentResult,
    AgentText,
    AgentToolUse,
)
from pokeralphd.agents.runner import run_agent
from pokeralphd.battle.judging import sole
from pokeralphd.battle.output import OutputStream
from pokeralphd.domain.ids import next_task_id
from pokeralphd.domain.inbox import Delivery, Feedback, Source
from pokeralphd.domain.planning import MAX_LAST_OUTPUT, PlanningSession
from pokeralphd.errors import InvalidParams, InvalidState, PokeralphError
from pokeralphd.planning.parse import draft_from, questions_in, validate_draft
from pokeralphd.planning.prompts import (
    build_answer_prompt,
    build_breakdown_prompt,
    build_planning_prompt,
)
from pokeralphd.proc import AgentScope
from pokeralphd.protocol import events as ev
from pokeralphd.protocol.results import FinishResult, PlanningStatus, Problem
from pokeralphd.sandbox.service import SandboxService

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup, TaskStatus

    from pokeralph_core.config.model import Config
    from pokeralphd.agents.base import AgentOutcome
    from pokeralphd.domain.models import PRD
    from pokeralphd.ports import Inbox
    from pokeralphd.proc import ProcessOwner
    from pokeralphd.store.repo_store import RepoStore

log = logging.getLogger(__name__)


def _problems(found: list[Any]) -> list[Problem]:
    """The draft's problems (as :func:`validate_draft` gives them and the session keeps
    them: ``{"field", "problem"}``), typed."""
    return [Problem(field=p["field"], problem=p["problem"]) for p in found]


SESSION_KIND = DocumentKind("planning-session", PlanningSession)
RESTARTED = "the daemon restarted during a planning turn: answer to continue the same agent session, or reset"


class RepoPlanner:
    """One repository's planning: its session (the one source of truth) and its turns."""

    def __init__(self, repo: RepoStore, service: PlanService, inbox: Inbox) -> None:
        self.repo = repo
        self.service = service
        self.inbox = inbox
        self.session = PlanningSession()
        self._scope: anyio.CancelScope | None = None
        self.path = repo.files.dir / "planning" / "session.json"

    def restore(self) -> None:
        """Pick up a session a previous daemon left (a turn cut short waits for an answer)."""
        try:
            loaded = documents.load(SESSION_KIND, self.path)
        except PokeralphError as exc:
            log.warning("%s: planning session not restored: %s", self.repo.name, exc.message)
            return
        if loaded is None or loaded.value.state == "idle":
            return
        session = self.session = loaded.value
        if session.state == "planning":
            session.state, session.error = "waiting_input", RESTARTED
            session.questions = session.questions or [RESTARTED]
        if session.state == "waiting_input" and session.delivery_id:
            self._listen(session.delivery_id)

    async def _persist(self) -> None:
        try:
            await self.repo.io(documents.save, SESSION_KIND, self.path, self.session)
        except PokeralphError as exc:
            log.warning("%s: planning session not saved: %s", self.repo.name, exc.message)

    def _listen(self, delivery_id: str) -> None:
        async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
            if self.session.delivery_id == delivery.id:
                answer = str(feedback.values.get("values", {}).get("answer", ""))
                await self.answer(answer, from_inbox=True)

        self.inbox.on_answer(delivery_id, on_answer)

    def status(self) -> PlanningStatus:
        """The session as ``planning.status`` shows it (its last output cut)."""
        s = self.session
        return PlanningStatus(
            state=s.state,
            idea=s.idea,
            breakdown=s.breakdown,
            session_id=s.session_id,
            questions=list(s.questions),
            delivery_id=s.delivery_id,
            prd=s.prd,
            problems=_problems(s.problems),
            error=s.error,
            turns=s.turns,
            last_output=s.last_output[-MAX_LAST_OUTPUT:],
        )

    def publish(self, event: ev.Payload) -> None:
        self.repo.publish(event)

    # -- control
    async def start(self, idea: str | None, breakdown: bool) -> PlanningStatus:
        if self.session.active:
            raise InvalidState(
                f"a planning session is {self.session.state} in {self.repo.name}; answer it, "
                "finish it or reset it (`pokeralphctl plan --reset`)",
                state=self.session.state,
            )
        if not breakdown and (not idea or not idea.strip()):
            raise InvalidParams("idea must not be empty", field="idea")
        # Reserve the session before the first await: a second start must see it taken.
        previous, self.session = (
            self.session,
            PlanningSession(state="planning", idea=idea, breakdown=breakdown),
        )
        try:
            if breakdown:
                prd, _ = await self.repo.prd()
                if prd is None:
                    raise InvalidState("breakdown needs an existing PRD (prd.update first)")
                prompt = build_breakdown_prompt(prd)
                self.session.idea = idea or prd.description
            else:
                prompt = build_planning_prompt(idea or "")
            await self._persist()
        except BaseException:
            self.session = previous
            raise
        self.service.spawn(self._turn, prompt)
        return self.status()

    async def answer(self, answer: str, *, from_inbox: bool = False) -> PlanningStatus:
        session = self.session
        if session.state != "waiting_input":
            raise InvalidState(
                f"planning is {session.state}, not waiting for an answer", state=session.state
            )
        if not answer.strip():
            raise InvalidParams("answer must not be empty", field="answer")
        delivery_id, session.delivery_id = session.delivery_id, None
        session.state, session.questions, session.error = "planning", [], None
        if delivery_id and not from_inbox:
            await self.inbox.record_outside_answer(
                delivery_id, {"values": {"answer": answer}}, None
            )
        await self._persist()
        self.service.spawn(self._turn, build_answer_prompt(answer))
        return self.status()

    async def reset(self) -> PlanningStatus:
        if self._scope is not None:
            self._scope.cancel()
        delivery_id = self.session.delivery_id
        self.session = PlanningSession()
        if delivery_id:
            await self.inbox.close(delivery_id, "planning was reset")
        await self._persist()
        self.publish(ev.PlanningReset())
        return self.status()

    async def finish(self, save: bool, merge: str) -> FinishResult:
        if merge not in ("replace", "merge"):
            raise InvalidParams("merge must be 'replace' or 'merge'", field="merge")
        session = self.session
        if session.prd is None:
            raise InvalidState(
                f"no PRD draft yet (planning is {session.state})", state=session.state
            )
        prd, problems = validate_draft(session.prd, session.idea)
        if prd is None:
            session.problems = problems
            return FinishResult(
                valid=False, problems=_problems(problems), saved=False, prd=session.prd
            )
        if not save:
            return FinishResult(valid=True, problems=[], saved=False, prd=prd.dump())
        existing, _ = await self.repo.prd()
        if merge == "merge" and existing is not None:
            ids = [t.id for t in existing.tasks] + await self.repo.io(
                self.repo.files.battle_task_ids
            )
            base = max((t.priority for t in existing.tasks), default=0)
            added = []
            for task in prd.tasks:
                new_id = next_task_id(task.title, ids)
                ids.append(new_id)
                added.append(
                    task.model_copy(update={"id": new_id, "priority": base + task.priority})
                )

            def change(old: PRD) -> PRD:
                old.tasks.extend(added)
                return old

            saved, version = await self.repo.update_prd(change, None)
        else:
            saved, version = await self.repo.update_prd(lambda _old: prd, None)
        self.session = PlanningSession()
        await self._persist()
        return FinishResult(valid=True, problems=[], saved=True, prd=saved.dump(), version=version)

    # -- one agent turn
    async def _turn(self, prompt: str) -> None:
        """One turn; whatever goes wrong is the session's failure, never the daemon's."""
        session = self.session
        try:
            await self._turn_once(session, prompt)
        except Exception as exc:
            log.exception("%s: planning turn failed", self.repo.name)
            self._failed(session, f"internal error: {exc}")
        finally:
            if self.session is session:
                with anyio.CancelScope(shield=True):
                    await self._persist()

    async def _run(
        self,
        config: Config,
        request: AgentRequest,
        on_event: Callable[[AgentEvent], None],
        stream: OutputStream,
    ) -> AgentOutcome:
        """The planning agent's run, in its sandbox: the repository read-only, no host
        but the model's (nobody is asked: a refusal names the key that allows it)."""

        def refused(_request: object, message: str) -> None:
            stream.raw(b"[pokeralph] " + message.encode())
            stream.chunk("notice", message)

        async with self.service.sandbox.run(
            config.sandbox,
            tree=self.repo.path,
            scope=request.scope,
            backend=config.agent.backend,
            env=config.agent.env,
            tree_writable=False,
            on_refused=refused,
        ) as box:
            request = dataclasses.replace(request, env={**request.env, **box.env})
            return await run_agent(
                get_backend(config.agent), request, on_event, stream.raw_lines, confine=box
            )

    async def _turn_once(self, session: PlanningSession, prompt: str) -> None:
        session.turns += 1
        turn = session.turns
        result: list[AgentResult] = []
        stream = OutputStream(
            self.repo.files.dir / "planning" / f"turn-{turn}.log",
            lambda chunks: self.publish(ev.PlanningOutput(turn=turn, chunks=chunks)),
            10,
        )

        def on_event(event: AgentEvent) -> None:
            if isinstance(event, AgentText):
                stream.chunk("text", event.text)
            elif isinstance(event, AgentLines):
                stream.lines(event.texts)
            elif isinstance(event, AgentToolUse):
                stream.chunk("tool_use", f"{event.name}: {event.summary}")
            elif isinstance(event, AgentResult):
                result.append(event)

        config = await self.repo.config()
        request = AgentRequest(
            prompt=prompt,
            cwd=self.repo.path,
            mode="plan",
            config=config.agent,
            env={
                "POKERALPH_REPO": self.repo.name,
                "POKERALPH_REPO_PATH": str(self.repo.path),
            },
            resume_session=session.session_id,
            timeout=config.timeout_minutes * 60,
            idle_timeout=config.idle_timeout_minutes * 60,
            owner=self.service.owner,
            scope=AgentScope("planning", self.repo.name),
        )
        self._scope = anyio.CancelScope()
        outcome = None
        try:
            await anyio.to_thread.run_sync(stream.open)
            with self._scope:
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(stream.run)
                        outcome = await self._run(config, request, on_event, stream)
                        tg.cancel_scope.cancel()
                except BaseExceptionGroup as group:
                    raise sole(group) from None
        except PokeralphError as exc:
            self._failed(session, exc.message)
            return
        finally:
            stream.close()
            self._scope = None
        if outcome is None or self.session is not session:
            return  # reset while running
        session.session_id = outcome.session_id or session.session_id
        if outcome.error:
            self._failed(session, outcome.error)
            return
        # The agent's final word: its result, else its last message; a plain-text agent's
        # words come a line at a time, so all of them, read as one (kept bounded)
        said = outcome.texts if outcome.by_lines else outcome.texts[-1:]
        final = result[-1].text if result and result[-1].text else "\n".join(said)
        session.last_output = final
        draft, problems = draft_from(final)
        if draft is not None:
            session.prd = draft
            _, session.problems = validate_draft(draft, session.idea)
            session.state = "completed"
            self.publish(
                ev.PlanningCompleted(
                    prd=draft, valid=not session.problems, problems=session.problems
                )
            )
            return
        questions = questions_in(final)
        if not questions:
            questions = [
                problems[0]
                if problems
                else "The agent neither asked a <question> nor produced a <prd>. Its last words:\n\n"
                + final[-1500:]
            ]
        session.questions = questions
        session.state = "waiting_input"
        await self._ask(session)

    async def _ask(self, session: PlanningSession) -> None:
        questions = session.questions
        body = "\n\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
        delivery = await self.inbox.create(
            f"Planning: {len(questions)} question(s) about “{(session.idea or '')[:60]}”",
            body,
            "interactive",
            {
                "type": "form",
                "fields": [
                    {
                        "name": "answer",
                        "type": "textarea",
                        "label": "Your answer",
                        "required": True,
                    }
                ],
            },
            Source(kind="planning"),
        )
        session.delivery_id = delivery.id
        self._listen(delivery.id)
        self.publish(
            ev.PlanningQuestion(
                questions=questions,
                question="\n\n".join(questions),
                delivery_id=session.delivery_id,
            )
        )

    def _failed(self, session: PlanningSession, error: str) -> None:
        session.error = error
        session.state = "waiting_input" if session.session_id else "idle"
        self.publish(ev.PlanningFailed(error=error, state=session.state))


class PlanService:
    """Daemon-wide side of planning: a planner per repository (``attach``) and the task
    group their turns run in."""

    def __init__(
        self, owner: ProcessOwner | None = None, sandbox: SandboxService | None = None
    ) -> None:
        self._tg: TaskGroup | None = None
        self.owner = owner  # the daemon's mark on planning agents
        self.sandbox = sandbox or SandboxService(enabled=False)  # where they run

    def spawn(self, func: Any, *args: Any) -> None:
        if self._tg is None:
            raise InvalidState("the daemon is not serving yet")
        self._tg.start_soon(func, *args)

    def attach(self, repo: RepoStore, inbox: Inbox) -> RepoPlanner:
        planner = RepoPlanner(repo, self, inbox)
        if repo.failure is None:
            planner.restore()
        return planner

    async def detach(self, planner: RepoPlanner) -> None:
        if planner.session.state == "planning":
            await planner.reset()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    async def stop(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
