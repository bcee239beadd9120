"""PlanService: per repository, one planning session at a time.

States follow the seed: ``idle`` → ``planning`` (the agent works, in plan mode) →
``waiting_input`` (it asked questions: an inbox item too) → ``planning`` (the answer
continues the same agent session, resumed by id) → … → ``completed`` (a PRD draft came in
the final turn). ``planning.finish`` validates the draft and saves it only when asked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import Field

from pokeralphd.agents import AgentRequest, get_backend, run_agent
from pokeralphd.agents.base import AgentEvent, AgentResult, AgentText, AgentToolUse
from pokeralphd.battle.output import OutputStream
from pokeralphd.domain.ids import next_task_id
from pokeralphd.domain.inbox import Delivery, Feedback, Source
from pokeralphd.domain.models import Model
from pokeralphd.errors import InvalidParams, InvalidState, PokeralphError
from pokeralphd.planning.parse import draft_from, questions_in, validate_draft
from pokeralphd.planning.prompts import (
    build_answer_prompt,
    build_breakdown_prompt,
    build_planning_prompt,
)
from pokeralphd.store import documents
from pokeralphd.store.documents import DocumentKind

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus

    from pokeralphd.daemon import Daemon
    from pokeralphd.domain.models import PRD
    from pokeralphd.runtime import RepoRuntime

log = logging.getLogger(__name__)
State = Literal["idle", "planning", "waiting_input", "completed"]


class PlanningSession(Model):
    """``.pokeralph/planning/session.json``: a planning session, so a restart keeps it."""

    state: State = "idle"
    idea: str | None = None
    breakdown: bool = False
    session_id: str | None = None
    questions: list[str] = Field(default_factory=list)
    delivery_id: str | None = None
    prd: dict[str, Any] | None = None
    problems: list[Any] = Field(default_factory=list)
    error: str | None = None
    turns: int = 0
    last_output: str = ""


SESSION_KIND = DocumentKind("planning-session", PlanningSession)
RESTARTED = "the daemon restarted during a planning turn: answer to continue the same agent session, or reset"


class RepoPlanner:
    state: State
    idea: str | None
    breakdown: bool
    session_id: str | None
    questions: list[str]
    delivery_id: str | None
    draft: dict[str, Any] | None
    problems: list[Any]
    error: str | None
    turns: int
    last_text: str
    _scope: anyio.CancelScope | None

    def __init__(self, runtime: RepoRuntime, service: PlanService) -> None:
        self.runtime = runtime
        self.service = service
        self._clear()
        self.path = runtime.files.dir / "planning" / "session.json"

    def restore(self) -> None:
        """Pick up a session a previous daemon left (a turn cut short waits for an answer)."""
        try:
            loaded = documents.load(SESSION_KIND, self.path)
        except PokeralphError as exc:
            log.warning("%s: planning session not restored: %s", self.runtime.name, exc.message)
            return
        if loaded is None or loaded.value.state == "idle":
            return
        saved = loaded.value
        self.state, self.idea, self.breakdown = saved.state, saved.idea, saved.breakdown
        self.session_id, self.questions, self.delivery_id = (
            saved.session_id,
            saved.questions,
            saved.delivery_id,
        )
        self.draft, self.problems, self.error = saved.prd, saved.problems, saved.error
        self.turns, self.last_text = saved.turns, saved.last_output
        if self.state == "planning":
            self.state, self.error = "waiting_input", RESTARTED
            self.questions = self.questions or [RESTARTED]
        if self.state == "waiting_input" and self.delivery_id:
            self.service_callbacks_for(self.delivery_id)

    async def _persist(self) -> None:
        session = PlanningSession.model_validate(self.status())
        try:
            await self.runtime.io(documents.save, SESSION_KIND, self.path, session)
        except PokeralphError as exc:
            log.warning("%s: planning session not saved: %s", self.runtime.name, exc.message)

    def service_callbacks_for(self, delivery_id: str) -> None:
        inbox = self.runtime.inbox
        if inbox is None:
            return

        async def on_answer(delivery: Delivery, feedback: Feedback) -> None:
            if self.delivery_id == delivery.id:
                answer = str(feedback.values.get("values", {}).get("answer", ""))
                await self.answer(answer, from_inbox=True)

        inbox.service.callbacks[delivery_id] = on_answer

    def _clear(self) -> None:
        self.state = "idle"
        self.idea = None
        self.breakdown = False
        self.session_id = None
        self.questions = []
        self.delivery_id = None
        self.draft = None
        self.problems = []
        self.error = None
        self.turns = 0
        self.last_text = ""
        self._scope = None

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "idea": self.idea,
            "breakdown": self.breakdown,
            "sessionId": self.session_id,
            "questions": self.questions,
            "deliveryId": self.delivery_id,
            "prd": self.draft,
            "problems": self.problems,
            "error": self.error,
            "turns": self.turns,
            "lastOutput": self.last_text[-2000:],
        }

    def publish(self, type_: str, payload: dict[str, Any]) -> None:
        self.runtime.publish(type_, payload)

    # -- control
    async def start(self, idea: str | None, breakdown: bool) -> dict[str, Any]:
        if self.state in ("planning", "waiting_input"):
            raise InvalidState(
                f"a planning session is {self.state} in {self.runtime.name}; answer it, finish it "
                "or reset it (`pokeralphctl plan --reset`)",
                state=self.state,
            )
        if breakdown:
            prd, _ = await self.runtime.prd()
            if prd is None:
                raise InvalidState("breakdown needs an existing PRD (prd.update first)")
            prompt = build_breakdown_prompt(prd)
            idea = idea or prd.description
        else:
            if not idea or not idea.strip():
                raise InvalidParams("idea must not be empty", field="idea")
            prompt = build_planning_prompt(idea)
        self._clear()
        self.idea, self.breakdown, self.state = idea, breakdown, "planning"
        await self._persist()
        self.service.spawn(self._turn, prompt)
        return self.status()

    async def answer(self, answer: str, *, from_inbox: bool = False) -> dict[str, Any]:
        if self.state != "waiting_input":
            raise InvalidState(
                f"planning is {self.state}, not waiting for an answer", state=self.state
            )
        if not answer.strip():
            raise InvalidParams("answer must not be empty", field="answer")
        delivery_id, self.delivery_id = self.delivery_id, None
        if delivery_id and not from_inbox and self.runtime.inbox is not None:
            await self.runtime.inbox.record_outside_answer(
                delivery_id, {"values": {"answer": answer}}, None
            )
        self.state, self.questions, self.error = "planning", [], None
        await self._persist()
        self.service.spawn(self._turn, build_answer_prompt(answer))
        return self.status()

    async def reset(self) -> dict[str, Any]:
        if self._scope is not None:
            self._scope.cancel()
        if self.delivery_id and self.runtime.inbox is not None:
            await self.runtime.inbox.close(self.delivery_id, "planning was reset")
        self._clear()
        await self._persist()
        self.publish("planning_reset", {})
        return self.status()

    async def finish(self, save: bool, merge: str) -> dict[str, Any]:
        if merge not in ("replace", "merge"):
            raise InvalidParams("merge must be 'replace' or 'merge'", field="merge")
        if self.draft is None:
            raise InvalidState(f"no PRD draft yet (planning is {self.state})", state=self.state)
        prd, problems = validate_draft(self.draft, self.idea)
        if prd is None:
            self.problems = problems
            return {"valid": False, "problems": problems, "saved": False, "prd": self.draft}
        if not save:
            return {"valid": True, "problems": [], "saved": False, "prd": prd.dump()}
        existing, _ = await self.runtime.prd()
        if merge == "merge" and existing is not None:
            ids = [t.id for t in existing.tasks] + await self.runtime.io(
                self.runtime.files.battle_task_ids
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

            saved, version = await self.runtime.update_prd(
                change, None, "prd_updated", lambda p: {"prd": p.dump()}
            )
        else:
            saved, version = await self.runtime.update_prd(
                lambda _old: prd, None, "prd_updated", lambda p: {"prd": p.dump()}
            )
        self._clear()
        await self._persist()
        return {
            "valid": True,
            "problems": [],
            "saved": True,
            "prd": saved.dump(),
            "version": version,
        }

    # -- one agent turn
    async def _turn(self, prompt: str) -> None:
        try:
            await self._turn_once(prompt)
        finally:
            with anyio.CancelScope(shield=True):
                await self._persist()

    async def _turn_once(self, prompt: str) -> None:
        self.turns += 1
        turn = self.turns
        texts: list[str] = []
        result: list[AgentResult] = []
        stream = OutputStream(
            self.runtime.files.dir / "planning" / f"turn-{turn}.log",
            lambda chunks: self.publish("planning_output", {"turn": turn, "chunks": chunks}),
            10,
        )

        def on_event(event: AgentEvent) -> None:
            if isinstance(event, AgentText):
                texts.append(event.text)
                stream.chunk("text", event.text)
            elif isinstance(event, AgentToolUse):
                stream.chunk("tool_use", f"{event.name}: {event.summary}")
            elif isinstance(event, AgentResult):
                result.append(event)

        config = await self.runtime.config()
        request = AgentRequest(
            prompt=prompt,
            cwd=self.runtime.path,
            mode="plan",
            config=config.agent,
            env={
                "POKERALPH_REPO": self.runtime.name,
                "POKERALPH_REPO_PATH": str(self.runtime.path),
            },
            resume_session=self.session_id,
            timeout=config.timeout_minutes * 60,
            idle_timeout=config.idle_timeout_minutes * 60,
        )
        self._scope = anyio.CancelScope()
        outcome = None
        try:
            await anyio.to_thread.run_sync(stream.open)
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stream.run)
                    outcome = await run_agent(
                        get_backend(config.agent), request, on_event, stream.raw
                    )
                    tg.cancel_scope.cancel()
        except PokeralphError as exc:
            self._failed(exc.message)
            return
        finally:
            stream.close()
            self._scope = None
        if outcome is None:
            return  # reset while running
        self.session_id = outcome.session_id or self.session_id
        if outcome.error:
            self._failed(outcome.error)
            return
        final = result[-1].text if result and result[-1].text else "\n".join(texts[-1:])
        self.last_text = final
        draft, problems = draft_from(final)
        if draft is not None:
            self.draft = draft
            _, self.problems = validate_draft(draft, self.idea)
            self.state = "completed"
            self.publish(
                "planning_completed",
                {"prd": draft, "valid": not self.problems, "problems": self.problems},
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
        self.questions = questions
        self.state = "waiting_input"
        await self._ask(questions)

    async def _ask(self, questions: list[str]) -> None:
        inbox = self.runtime.inbox
        if inbox is not None:
            body = "\n\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
            delivery = await inbox.create(
                f"Planning: {len(questions)} question(s) about “{(self.idea or '')[:60]}”",
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
            self.delivery_id = delivery.id
            self.service_callbacks_for(delivery.id)
        self.publish(
            "planning_question",
            {
                "questions": self.questions,
                "question": "\n\n".join(self.questions),
                "deliveryId": self.delivery_id,
            },
        )

    def _failed(self, error: str) -> None:
        self.error = error
        self.state = "waiting_input" if self.session_id else "idle"
        self.publish("planning_failed", {"error": error, "state": self.state})


class PlanService:
    """Daemon extension: a planner per runtime, and the task group their turns run in."""

    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    def spawn(self, func: Any, *args: Any) -> None:
        if self._tg is None:
            raise InvalidState("the daemon is not serving yet")
        self._tg.start_soon(func, *args)

    def attach(self, runtime: RepoRuntime) -> None:
        planner = RepoPlanner(runtime, self)
        runtime.planning = planner
        if runtime.failure is None:
            planner.restore()

    async def detach(self, runtime: RepoRuntime) -> None:
        planner = runtime.planning
        if isinstance(planner, RepoPlanner) and planner.state == "planning":
            await planner.reset()

    async def run(
        self, daemon: Daemon, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    async def stop(self, daemon: Daemon) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
