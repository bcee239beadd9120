"""One verification or review run (seed 003's QA agent and reviewer): prompt, agent run,
the working tree put back, the report read, saved and announced.

The role runs after the implementation commit, on the agent ``roles.verifier`` or
``roles.reviewer`` names (else the battle's own), in the repository itself, so it can run
the tests. It must not change the work it judges: whatever it changes in the working tree
is put back afterwards (a path that was clean before is checked out again, a file it
created is removed); a path that held a person's uncommitted edits before the run and
was changed by it is left as it is and named in the report (``keptChanges``). A role that
commits is caught: its report is invalid, and the commit is named (history is never
rewritten).

What comes of a run (:class:`RoleVerdict`):

- a transient failure (see :mod:`pokeralphd.battle.transient`): no report, no cycle
  counted; the battle blocks and runs the phase again;
- the agent cannot be started: fatal, as for an iteration;
- otherwise a report, valid or not, written atomically to
  ``battles/{taskId}/{phase}/report-{cycle}.json`` *before* the battle's record counts
  the cycle, so a daemon killed in between runs the same cycle again (no half-written
  report, no cycle lost or counted twice).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from pokeralph_core.timeutil import utcnow
from pokeralphd.agents import get_backend
from pokeralphd.agents.base import (
    AgentEvent,
    AgentLines,
    AgentStarted,
    AgentText,
)
from pokeralphd.agents.runner import run_agent
from pokeralphd.battle.agentrun import battle_request, battle_sandbox, refusal_note
from pokeralphd.battle.costs import charge
from pokeralphd.battle.gitservice import GitService
from pokeralphd.battle.judging import agent_words, sole
from pokeralphd.battle.output import OutputStream
from pokeralphd.battle.reports import (
    parse_review,
    parse_verification,
    review_passed,
    verification_passed,
)
from pokeralphd.battle.roleprompts import ROLE_NAME, Role, build_role_prompt
from pokeralphd.battle.state import Charge
from pokeralphd.battle.transient import transient_failure
from pokeralphd.domain.models import ReportOutcome, ReportSummary, Usage
from pokeralphd.domain.reports import AgentRun, ReviewReport, VerificationReport
from pokeralphd.domain.statuses import IterationResult
from pokeralphd.errors import AgentError, PokeralphError
from pokeralphd.proc import create_time
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from pokeralph_core.config.model import Config
    from pokeralphd.agents.base import AgentOutcome, ApiFailure
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import FeedbackResult, PhaseCycles

log = logging.getLogger(__name__)


@dataclass
class RoleVerdict:
    report: VerificationReport | ReviewReport | None = None
    passed: bool = False
    transient: ApiFailure | None = None
    fatal: str | None = None
    stopped: bool = False  # paused at once: the agent was stopped, no report


def cycles_of(active: ActiveBattle, role: Role) -> PhaseCycles:
    return active.battle.verification if role == "verification" else active.battle.review


class RoleRun:
    def __init__(self, orch: BattleControl, active: ActiveBattle, role: Role, config: Config):
        self.orch = orch
        self.active = active
        self.role = role
        self.config = config
        self.repo = orch.repo
        self.task_id = active.task_id
        # where the agent, the loops and git work: the battle's worktree, if it has one
        self.workdir = active.workdir or self.repo.path
        self.git = GitService(self.workdir)
        self.cycles = cycles_of(active, role)
        self.cycle = self.cycles.count + 1
        self.agent = config.role_agent("verifier" if role == "verification" else "reviewer")
        battle = active.battle
        self.iteration = max((i.number for i in battle.iterations), default=0)
        self.sandbox: dict[str, Any] | None = None  # the run's, for its report summary
        self.kept: list[str] = []
        self.discarded: list[str] = []
        self.usage: Usage | None = None  # the run's tokens, once it ran
        self._started = anyio.Event()
        self.stream = OutputStream(
            self.repo.files.role_log_path(self.task_id, role, self.cycle),
            lambda chunks: orch.publish(
                ev.IterationOutput(
                    task_id=self.task_id,
                    iteration=self.iteration,
                    phase=role,
                    cycle=self.cycle,
                    chunks=chunks,
                )
            ),
            config.output_coalesce_ms,
        )

    # -- agent events (shown as the implementer's are; no completion is looked for)
    def on_event(self, event: AgentEvent) -> None:
        progress = self.active.progress
        self.stream.show(event)
        match event:
            case AgentText(text=text):
                progress.last_output = text.strip()[-500:]
            case AgentLines(texts=texts):
                progress.last_output = texts[-1].strip()[-500:]
            case AgentStarted(pid=pid):
                progress.agent_pid = pid
                progress.agent_started = create_time(pid)
                self._started.set()
            case _:
                pass

    async def run(self) -> RoleVerdict:
        active = self.active
        prd, _ = await self.repo.prd()
        task, _ = await self.repo.task(self.task_id)
        if prd is None:
            return RoleVerdict(fatal="the PRD disappeared during the battle")
        stat, diff = await anyio.to_thread.run_sync(self.git.diff, active.battle.base_commit)
        prompt = build_role_prompt(
            self.role,
            prd,
            task,
            active.battle,
            self.cycle,
            self.cycles.limit,
            stat,
            diff,
            self._loops(),
        )
        head = await anyio.to_thread.run_sync(self.git.head)
        snapshot = await anyio.to_thread.run_sync(self.git.snapshot)
        await anyio.to_thread.run_sync(self.stream.open)
        started = time.monotonic()
        outcome: AgentOutcome | None = None
        scope = anyio.CancelScope()
        try:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.stream.run)
                    tg.start_soon(self._save_pid)
                    active.iteration_scope = scope
                    if active.stop_reason == "pause_now":
                        scope.cancel()  # paused "now" before the agent started
                    with scope:
                        outcome = await self._run_agent(prompt)
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                raise sole(group) from None
            finally:
                active.iteration_scope = None
                active.progress.agent_pid = active.progress.agent_started = None
        except AgentError as exc:
            self.stream.chunk("notice", exc.message)
            return RoleVerdict(fatal=exc.message)
        finally:
            with anyio.CancelScope(shield=True):
                await self._put_back(snapshot)
                self.stream.close()
        if scope.cancelled_caught or outcome is None:
            return RoleVerdict(stopped=True)
        failure = transient_failure(outcome)
        if failure is not None:
            self.stream.chunk("notice", f"transient failure: {failure.message}")
            self.stream.close()
            return RoleVerdict(transient=failure)
        if outcome.result is not None and outcome.result.usage is not None:
            active.battle.usage = active.battle.usage.plus(outcome.result.usage)
            self.usage = outcome.result.usage
        report = await self._report(task.acceptance_criteria, outcome, head, started)
        passed = (
            verification_passed(report)
            if isinstance(report, VerificationReport)
            else review_passed(report)
        )
        await self._record(report, passed)
        return RoleVerdict(report=report, passed=passed)

    async def _save_pid(self) -> None:
        """Record the agent's pid at once: a restarted daemon ends what it left running."""
        await self._started.wait()
        await self.orch.save(self.active)

    def _loops(self) -> dict[str, FeedbackResult]:
        """The loops' results of the last implementation iteration that ran them."""
        for it in reversed(self.active.battle.iterations):
            if it.result == IterationResult.SUCCESS and it.feedback_results:
                return dict(it.feedback_results)
        return {}

    async def _run_agent(self, prompt: str) -> AgentOutcome:
        backend = get_backend(self.agent)
        async with battle_sandbox(
            self.orch,
            self.active,
            self.config,
            workdir=self.workdir,
            iteration=self.iteration,
            on_event=self.on_event,
            on_refused=refusal_note(self.stream),
            agent=self.agent,
        ) as box:
            self.sandbox = box.describe()
            self.stream.confined = bool(self.sandbox.get("confined"))
            request = await battle_request(
                self.orch,
                self.active,
                self.config,
                self.agent,
                prompt,
                workdir=self.workdir,
                iteration=self.iteration,
                env={"POKERALPH_ROLE": ROLE_NAME[self.role], **box.env},
            )
            return await run_agent(
                backend, request, self.on_event, self.stream.raw_lines, confine=box
            )

    async def _put_back(self, snapshot: dict[str, str]) -> None:
        """Undo what the role changed in the working tree (see the module docstring)."""
        try:
            changed = await anyio.to_thread.run_sync(self.git.changed_since, snapshot)
            clean_before = [p for p in changed if p not in snapshot]
            self.kept = [p for p in changed if p in snapshot]
            self.discarded = await anyio.to_thread.run_sync(self.git.restore, clean_before)
        except PokeralphError as exc:
            log.warning(
                "%s: cannot put the tree back after the %s: %s", self.task_id, self.role, exc
            )
            self.kept, self.discarded = [], []
        except Exception:
            log.exception("%s: cannot put the tree back after the %s", self.task_id, self.role)
            self.kept, self.discarded = [], []
        if self.discarded:
            self.stream.chunk(
                "notice",
                f"the {ROLE_NAME[self.role]} changed {', '.join(self.discarded[:10])}: put back",
            )

    async def _report(
        self, criteria: list[str], outcome: AgentOutcome, head: str | None, started: float
    ) -> VerificationReport | ReviewReport:
        result = outcome.result
        base: dict[str, Any] = {
            "taskId": self.task_id,
            "cycle": self.cycle,
            "createdAt": utcnow(),
            "iteration": self.iteration or None,
            "baseCommit": self.active.battle.base_commit,
            "headCommit": head,
            "agent": AgentRun(
                backend=self.agent.backend,
                model=self.agent.model,
                session_id=outcome.session_id,
                cost_usd=result.cost_usd if result else None,
                duration_ms=int((time.monotonic() - started) * 1000),
                exit_code=outcome.exit_code,
            ),
            "discardedChanges": list(self.discarded[:200]),
            "keptChanges": list(self.kept[:200]),
        }
        texts = agent_words(outcome)
        report: VerificationReport | ReviewReport = (
            parse_verification(texts, criteria, base)
            if self.role == "verification"
            else parse_review(texts, base)
        )
        now_head = await anyio.to_thread.run_sync(self.git.head)
        problem = None
        if now_head != head:
            problem = (
                f"the {ROLE_NAME[self.role]} committed ({(now_head or '')[:12]}); it must not "
                "change the work it judges (the commit is left in place)"
            )
        elif not report.valid and outcome.error:
            problem = f"{report.problem}; the agent failed: {outcome.error[:500]}"
        elif outcome.reason in ("timeout", "idle"):
            problem = outcome.error or "the agent was stopped"
        if problem is not None:
            report = report.model_copy(update={"valid": False, "problem": problem})
        return report

    async def _record(self, report: VerificationReport | ReviewReport, passed: bool) -> None:
        """Save the report, then count the cycle in the battle's record, then announce it."""
        files = self.repo.files
        await self.repo.io(files.save_report, self.role, report)
        battle = self.active.battle
        agent = report.agent
        if agent is not None and agent.cost_usd:
            battle.cost_usd += agent.cost_usd
        if agent is not None:
            await charge(
                self.orch,
                self.active,
                Charge(
                    phase=self.role,
                    iteration=report.iteration or 0,
                    at=report.created_at,
                    backend=agent.backend,
                    model=agent.model,
                    cost_usd=agent.cost_usd,
                    usage=self.usage,
                ),
            )
        outcome: ReportOutcome
        if isinstance(report, VerificationReport):
            outcome = report.recommendation if report.valid else "invalid"
            failed = [c for c in report.acceptance_criteria if c.status != "passed"]
            findings, blocking = len(report.feedback.items), len(failed)
            summary = report.feedback.summary
        else:
            outcome = report.assessment if report.valid else "invalid"
            findings, blocking = len(report.comments), len(report.blocking_comments())
            summary = report.feedback.message
        self.cycles.count = self.cycle
        self.cycles.reports.append(
            ReportSummary(
                cycle=self.cycle,
                outcome=outcome,
                passed=passed,
                summary=summary[:1000],
                iteration=report.iteration,
                head_commit=report.head_commit,
                created_at=report.created_at,
                findings=findings,
                blocking=blocking,
                problem=report.problem,
                cost_usd=agent.cost_usd if agent else None,
                duration_ms=agent.duration_ms if agent else None,
                sandbox=self.sandbox,
            )
        )
        await self.orch.save(self.active)
        path = str(files.report_path(self.task_id, self.role, self.cycle))
        if isinstance(report, VerificationReport):
            criteria = report.acceptance_criteria
            counts = {
                status: sum(1 for c in criteria if c.status == status)
                for status in ("passed", "failed", "blocked")
            }
            self.orch.publish(
                ev.VerificationReportEvent(
                    task_id=self.task_id,
                    cycle=self.cycle,
                    max_cycles=self.cycles.limit,
                    iteration=report.iteration,
                    valid=report.valid,
                    passed=passed,
                    outcome=report.recommendation if report.valid else "invalid",
                    summary=summary[:1000],
                    problem=report.problem,
                    findings=findings,
                    blocking=blocking,
                    criteria=ev.CriteriaCounts(**counts),
                    path=path,
                )
            )
        else:
            self.orch.publish(
                ev.ReviewReportEvent(
                    task_id=self.task_id,
                    cycle=self.cycle,
                    max_cycles=self.cycles.limit,
                    iteration=report.iteration,
                    valid=report.valid,
                    passed=passed,
                    outcome=outcome,
                    assessment=report.assessment if report.valid else None,
                    summary=summary[:1000],
                    problem=report.problem,
                    findings=findings,
                    blocking=blocking,
                    path=path,
                )
            )
