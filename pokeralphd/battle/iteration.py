"""One iteration: prompt, agent run (streamed to the log and to subscribers), completion
detection, feedback loops, git, and the iteration record.

The agent's own words are the only place a completion signal is looked for; tool results
(which echo files, the prompt included) never are. An iteration cancelled from outside
(pause now, cancel, daemon shutdown) is still recorded, under a shielded scope.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from pokeralph_core.timeutil import utcnow
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import (
    AgentEvent,
    AgentLines,
    AgentOutcome,
    AgentResult,
    AgentStarted,
    AgentText,
    ApiFailure,
)
from pokeralphd.agents.runner import run_agent
from pokeralphd.battle.agentrun import battle_request, battle_sandbox, battle_scope, refusal_note
from pokeralphd.battle.completion import detect_completion
from pokeralphd.battle.costs import charge
from pokeralphd.battle.feedback import detect_loops, resolve_loops, run_loop
from pokeralphd.battle.gitservice import GitService
from pokeralphd.battle.judging import (
    agent_words,
    output_summary,
    rejected_claim_reasons,
    skipped_loop,
    sole,
)
from pokeralphd.battle.output import OutputStream
from pokeralphd.battle.prompt import build_task_prompt
from pokeralphd.battle.state import Charge
from pokeralphd.battle.toolcalls import ToolCallLog
from pokeralphd.battle.transient import transient_failure
from pokeralphd.domain.models import CompletionSignal, FeedbackResult, Iteration
from pokeralphd.domain.statuses import IterationResult, ProgressStatus, check_progress_transition
from pokeralphd.errors import AgentError, PokeralphError
from pokeralphd.permissions.router import policy_warnings
from pokeralphd.proc import create_time
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from pokeralph_core.config.model import Config
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.sandbox.service import SandboxRun

log = logging.getLogger(__name__)
MAX_PROGRESS_LOGS = 50
_DIGITS = re.compile(r"\d+")


@dataclass
class IterationVerdict:
    iteration: Iteration
    completed: bool
    fatal: str | None = None  # the battle cannot go on (missing agent binary, broken PRD)
    api_failure: ApiFailure | None = None  # transient: retried after a backoff, not counted
    # The agent failed before doing any work (a bad flag, a missing model): its error, as
    # a signature that ignores numbers (pids, times), to tell the same failure again.
    startup_failure: str | None = None


def _refused(outcome: AgentOutcome) -> bool:
    """The API refused or failed the run (a rate limit, an overload, a server error; see
    :func:`transient_failure`): the agent did no work worth judging, so no completion is
    looked for and no loop runs."""
    return outcome.api_failure is not None


def startup_failure(outcome: AgentOutcome | None, record: Iteration) -> str | None:
    """The failure's signature when the agent failed before doing any work: it exited
    with an error (not the API's transient doing), said nothing, called no tool and
    changed no file. Numbers are left out, so a pid or a time in the message does not
    make the same failure look new."""
    if (
        outcome is None
        or outcome.reason != "exited"
        or outcome.api_failure is not None
        or record.result != IterationResult.FAILURE
        or not record.error
        or outcome.texts
        or record.tool_calls
        or record.files_changed
    ):
        return None
    return _DIGITS.sub("#", record.error)


class IterationRun:
    def __init__(self, orch: BattleControl, active: ActiveBattle, number: int, config: Config):
        self.orch = orch
        self.active = active
        self.number = number
        self.config = config
        self.repo = orch.repo
        self.task_id = active.task_id
        # where the agent, the loops and git work: the battle's worktree, if it has one
        self.workdir = active.workdir or self.repo.path
        self.git = GitService(self.workdir)
        self.result: AgentResult | None = None
        self._progress_dirty = anyio.Event()
        # The agent's latest words, not yet in ``progress``: put there when it is written
        # (at most once per polling interval), not per line (a validated model assignment
        # per line was a fifth of the event loop's time under a flood of output).
        self._texts: deque[str] = deque(maxlen=MAX_PROGRESS_LOGS)
        self.timings: dict[str, float] = {}
        self.note_used: str | None = None
        self._mark = time.perf_counter()
        self.calls = ToolCallLog(self.workdir)  # files it names are the worktree's
        self.sandbox: dict[str, Any] | None = None  # the agent run's, for the record
        active.warnings = policy_warnings(config)
        self.stream = OutputStream(
            self.repo.files.log_path(self.task_id, number),
            lambda chunks: orch.publish(
                ev.IterationOutput(task_id=self.task_id, iteration=number, chunks=chunks)
            ),
            config.output_coalesce_ms,
        )

    def lap(self, phase: str) -> None:
        """Charge the time since the last lap to ``phase`` (for the overhead benchmark)."""
        now = time.perf_counter()
        self.timings[phase] = round(self.timings.get(phase, 0.0) + (now - self._mark) * 1000, 3)
        self._mark = now

    # -- agent events
    def on_event(self, event: AgentEvent) -> None:
        progress = self.active.progress
        self.calls.on_event(event)
        self.stream.show(event)
        match event:
            case AgentText(text=text):
                self._texts.append(text)
                if not self._progress_dirty.is_set():
                    self._progress_dirty.set()
            case AgentLines(texts=texts):
                self._texts.extend(texts)
                if not self._progress_dirty.is_set():
                    self._progress_dirty.set()
            case AgentStarted(pid=pid):
                progress.agent_pid = pid
                progress.agent_started = create_time(pid)
                self._progress_dirty.set()
            case AgentResult():
                self.result = event

    def _take_texts(self) -> None:
        """Put the agent's words since the last write into ``progress``."""
        if not self._texts:
            return
        progress = self.active.progress
        texts = [text.strip() for text in self._texts]
        self._texts.clear()
        progress.last_output = texts[-1][-500:]
        progress.logs = [*progress.logs, *(text[:500] for text in texts)][-MAX_PROGRESS_LOGS:]

    async def _progress_writer(self) -> None:
        """Write progress.json (and publish ``progress_update``) when it changed, at most
        once per polling interval: a battle's progress costs the same at 1 line a second
        as at 1,000."""
        interval = self.config.polling_interval_ms / 1000
        while True:
            await self._progress_dirty.wait()
            self._progress_dirty = anyio.Event()
            self._take_texts()
            # the battle's record changes only at the iteration's end (_finish saves it)
            await self.orch.save(self.active, history=False)
            await anyio.sleep(interval)

    # -- the iteration
    async def run(self) -> IterationVerdict:
        active, orch = self.active, self.orch
        started = utcnow()
        clock = time.monotonic()
        progress = active.progress
        progress.current_iteration = self.number
        progress.status = check_progress_transition(progress.status, ProgressStatus.IN_PROGRESS)
        progress.completion_detected = False
        progress.error = None
        progress.feedback_results = {}
        progress.last_output = ""
        await orch.save(active)
        self.lap("write")
        orch.publish(
            ev.IterationStart(
                task_id=self.task_id,
                iteration=self.number,
                max_iterations=active.battle.max_iterations,
            )
        )
        record = Iteration(number=self.number, started_at=started, result=IterationResult.CANCELLED)
        outcome: AgentOutcome | None = None
        fatal: str | None = None
        feedback: dict[str, FeedbackResult] = {}
        completion: CompletionSignal | None = None
        try:
            prompt = await self._prompt()
            self.lap("prompt")
            snapshot = await anyio.to_thread.run_sync(self._snapshot_and_open)
            if self.stream.log_error:
                orch.publish(
                    ev.IterationOutput(
                        task_id=self.task_id,
                        iteration=self.number,
                        chunks=[ev.Chunk("notice", self.stream.log_error)],
                    )
                )
            scope = anyio.CancelScope()
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.stream.run)
                    tg.start_soon(self._progress_writer)
                    active.iteration_scope = scope
                    if active.stop_reason == "pause_now":
                        scope.cancel()  # paused "now" before the agent started
                    with scope:
                        outcome = await self._run_agent(prompt)
                        # exit codes 23/124 and lost connections are transient too
                        outcome.api_failure = transient_failure(outcome)
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                raise sole(group) from None
            finally:
                active.iteration_scope = None
            self.stream.close()
            self.lap("agent")
            if scope.cancelled_caught:
                record.error = "paused immediately: the agent was stopped"
            elif outcome is not None and not _refused(outcome):
                completion, feedback = await self._judge(outcome)
            self.lap("feedback")
            before = record
            record, commit_failed = await anyio.to_thread.run_sync(
                self._changes,
                snapshot,
                lambda files: self._record(before, outcome, feedback, completion, files, clock),
            )
            if commit_failed is not None:  # the stream is closed: sent at once
                self.stream.chunk("notice", f"auto-commit failed: {commit_failed}")
                self.stream.flush()
            self.lap("git")
        except AgentError as exc:
            fatal = exc.message
            record.error = exc.message
            record.result = IterationResult.FAILURE
            self.stream.chunk("notice", exc.message)
            self.stream.close()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self.stream.close()
                record.error = {
                    "cancel": "battle cancelled: the agent was stopped",
                    "shutdown": "the daemon stopped during this iteration",
                }.get(active.stop_reason or "", "cancelled")
                await self._finish(record, clock)
            raise
        except PokeralphError as exc:
            fatal = exc.message
            record.error = exc.message
            record.result = IterationResult.FAILURE
            self.stream.close()
        await self._finish(record, clock)
        signalled_and_passed = (
            completion is not None
            and record.result == IterationResult.SUCCESS
            and all(r.passed or r.skipped for r in feedback.values())
        )
        active.completion_problems = rejected_claim_reasons(outcome, completion, feedback, record)
        return IterationVerdict(
            record,
            completed=signalled_and_passed,
            fatal=fatal,
            api_failure=outcome.api_failure if outcome else None,
            startup_failure=startup_failure(outcome, record),
        )

    async def _prompt(self) -> str:
        prd, _ = await self.repo.prd()
        task, _ = await self.repo.task(self.task_id)
        if prd is None:
            raise PokeralphError("the PRD disappeared during the battle")
        note, self.active.approval_note = self.active.approval_note, None
        self.note_used = note
        return build_task_prompt(
            prd,
            task,
            self.number,
            self.active.battle.max_iterations or self.config.max_iterations_per_task,
            list(self.active.battle.iterations),
            note,
            list(self.active.completion_problems),
            list(self.config.feedback_loops),
            findings=self.active.battle.findings,
            guidance=self.active.battle.guidance,
        )

    async def _run_agent(self, prompt: str) -> AgentOutcome:
        backend = get_backend(self.config.agent)
        async with self._sandbox(refusal_note(self.stream), agent=True) as box:
            self.sandbox = box.describe()
            self.stream.confined = bool(self.sandbox.get("confined"))
            request = await battle_request(
                self.orch,
                self.active,
                self.config,
                self.config.agent,
                prompt,
                workdir=self.workdir,
                iteration=self.number,
                env=box.env,
            )
            return await run_agent(
                backend, request, self.on_event, self.stream.raw_lines, confine=box
            )

    def _sandbox(
        self, on_refused: Callable[[str], object], *, agent: bool
    ) -> AbstractAsyncContextManager[SandboxRun]:
        return battle_sandbox(
            self.orch,
            self.active,
            self.config,
            workdir=self.workdir,
            iteration=self.number,
            on_event=self.on_event,
            on_refused=on_refused,
            agent=self.config.agent if agent else None,
        )

    async def _judge(
        self, outcome: AgentOutcome
    ) -> tuple[CompletionSignal | None, dict[str, FeedbackResult]]:
        completion = None
        if outcome.reason == "exited":
            completion = detect_completion(agent_words(outcome), self.task_id)
            self.active.progress.completion_detected = completion is not None
        feedback: dict[str, FeedbackResult] = {}
        if outcome.reason != "exited":
            return completion, feedback
        names, commands = list(self.config.feedback_loops), dict(self.config.feedback_commands)
        # what the repository's files say is asked only for a loop with no command set
        detected = (
            {}
            if all(commands.get(name) for name in names)
            else await anyio.to_thread.run_sync(detect_loops, self.workdir)
        )
        loops = resolve_loops(names, detected, commands)
        timeout = self.config.feedback_timeout_minutes * 60
        for name, command in loops.items():
            if command is None:
                result = skipped_loop(name)
            else:
                refused: list[str] = []
                async with self._sandbox(refused.append, agent=False) as box:
                    result = await run_loop(
                        name,
                        command,
                        self.workdir,
                        timeout,
                        owner=self.orch.host.owner,
                        scope=battle_scope(self.orch, self.active),
                        confine=box,
                    )
                if refused:  # the loop's log is its output: the [pokeralph] lines go there
                    lines = "".join(f"\n[pokeralph] {line}" for line in refused[:20])
                    result = result.model_copy(update={"output": result.output + lines})
            feedback[name] = result
            self.active.progress.feedback_results = dict(feedback)
            self.orch.publish(
                ev.FeedbackResultEvent(
                    task_id=self.task_id,
                    iteration=self.number,
                    loop=name,
                    result=result.dump(),
                    results={k: v.dump() for k, v in feedback.items()},
                )
            )
        return completion, feedback

    def _record(
        self,
        record: Iteration,
        outcome: AgentOutcome | None,
        feedback: dict[str, FeedbackResult],
        completion: CompletionSignal | None,
        files_changed: list[str],
        clock: float,
    ) -> Iteration:
        data: dict[str, Any] = {
            "feedback_results": feedback,
            "completion": completion,
            "files_changed": files_changed,
            "output": output_summary(outcome, self.stream.last_text),
            "approval_note": self.note_used,
            "sandbox": self.sandbox,
        }
        if outcome is not None:
            result = outcome.result
            data.update(
                session_id=outcome.session_id,
                exit_code=outcome.exit_code,
                cost_usd=result.cost_usd if result else None,
                usage=result.usage if result else None,
            )
            if outcome.reason == "timeout":
                data.update(
                    result=IterationResult.TIMEOUT,
                    error=outcome.error or f"timed out after {self.config.timeout_minutes} min",
                )
            elif outcome.reason == "idle":
                data.update(
                    result=IterationResult.TIMEOUT,
                    error=outcome.error or "the agent printed nothing for too long and was stopped",
                )
            elif outcome.api_failure is not None:
                # The API's doing, not the agent's (the CLI's own rate-limit event included:
                # see transient_failure): recorded, never counted.
                data.update(
                    result=IterationResult.CANCELLED,
                    error=outcome.error or f"API error: {outcome.api_failure.message}",
                )
            elif outcome.error:
                data.update(result=IterationResult.FAILURE, error=outcome.error)
            else:
                data.update(result=IterationResult.SUCCESS)
        return record.model_copy(update=data)

    # -- git, in a worker thread: one hop before the agent, one after it
    def _snapshot_and_open(self) -> dict[str, str]:
        """What is changed before the agent runs (charged to ``git``), and its log opened."""
        snapshot = self.git.snapshot()
        self.lap("git")
        self.stream.open()
        return snapshot

    def _changes(
        self, snapshot: dict[str, str], record_of: Callable[[list[str]], Iteration]
    ) -> tuple[Iteration, str | None]:
        """The files the iteration changed, its record (``record_of`` them), and their
        commit where auto-commit is on and the iteration was not cancelled; and why the
        commit failed, if it did (said in the log: the iteration stands)."""
        files = self.git.changed_since(snapshot)
        record = record_of(files)
        if not (self.config.auto_commit and files and record.result != IterationResult.CANCELLED):
            return record, None
        message = self.git.format_commit_message(self.task_id, self.active.title)
        body = (
            f"{message}\n\nIteration {self.number} of battle attempt {self.active.battle.attempt}."
        )
        try:
            record.commit_hash = self.git.commit(
                files, body, include_runtime=self.config.commit_runtime_files
            )
        except PokeralphError as exc:
            return record, exc.message
        return record, None

    async def _finish(self, record: Iteration, clock: float) -> None:
        active = self.active
        record.ended_at = utcnow()
        record.tool_calls = self.calls.records()
        record.tool_calls_omitted = self.calls.omitted
        record.duration_ms = int((time.monotonic() - clock) * 1000)
        battle = active.battle
        battle.iterations = [i for i in battle.iterations if i.number != record.number] + [record]
        if record.cost_usd:
            battle.cost_usd += record.cost_usd
        if record.usage:
            battle.usage = battle.usage.plus(record.usage)
        self._take_texts()
        active.progress.agent_pid = active.progress.agent_started = None
        active.progress.error = record.error
        self.lap("write")
        record.timings_ms = dict(self.timings)
        await self.orch.save(active)
        await charge(
            self.orch,
            active,
            Charge(
                phase="implementation",
                iteration=record.number,
                at=record.ended_at or record.started_at,
                backend=self.config.agent.backend,
                model=self.config.agent.model,
                cost_usd=record.cost_usd,
                usage=record.usage,
            ),
        )
        self.orch.publish(
            ev.IterationEnd(
                task_id=self.task_id,
                iteration=record.number,
                result=record.result.value,
                error=record.error,
                duration_ms=record.duration_ms,
                cost_usd=record.cost_usd,
                battle_cost_usd=round(battle.cost_usd, 6),
                files_changed=record.files_changed,
                commit_hash=record.commit_hash,
                completion=record.completion.dump() if record.completion else None,
                feedback={k: v.passed for k, v in record.feedback_results.items() if not v.skipped},
            )
        )
