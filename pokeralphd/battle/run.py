"""BattleRun: the one owner of one battle, from its start to its final word.

A battle's live state (:class:`~pokeralphd.battle.state.ActiveBattle`) is held by its
``BattleRun`` and changed by its runner alone: outside code, the control handlers and
the inbox hooks, reaches it through the run's methods, which check what is asked
against the battle's status and post a command (:mod:`pokeralphd.battle.commands`).
The runner acts on commands at its decision points, so a pause, a resume, an approval
or an answered escalation is a message, never a flag set from outside.

The loop runs the battle's phases until complete, failed, paused, escalated or
cancelled. The implementation runs iterations: HITL waits for approval after every
iteration, YOLO runs on. A pause takes effect between iterations (or at once with
``now``); only iterations that really ran (success, failure, timeout) count against the
maximum. Once an iteration's completion is accepted, the battle goes through its further
phases (verification, review: :mod:`pokeralphd.battle.phases`), each a role's run
(:mod:`pokeralphd.battle.roles`).

Transient failures never burn iterations or cycles: the battle is ``blocked`` for a
backoff and the same step runs again; past the retries it is escalated. An escalated
battle gives its slot back and waits for a person's answer, like a paused one. Every
timed wait runs on the engine's clock and ends early on a command.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import anyio

from pokeralph_core.config.model import ExecutionMode
from pokeralph_core.timeutil import utcnow
from pokeralphd.battle import budget, phases
from pokeralphd.battle.commands import Answered, Approve, Mailbox, Pause, Resume, Stop
from pokeralphd.battle.iteration import IterationRun
from pokeralphd.battle.roles import RoleRun, cycles_of
from pokeralphd.clock import wait_or_timeout
from pokeralphd.domain.models import EscalationResolution
from pokeralphd.domain.statuses import BattleStatus, IterationResult, battle_path
from pokeralphd.errors import InvalidState
from pokeralphd.protocol import events as ev

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pokeralph_core.config.model import Config, Phase
    from pokeralphd.battle.commands import Command
    from pokeralphd.battle.state import ActiveBattle, BattleControl
    from pokeralphd.domain.models import Blocked, Escalation, EscalationAction

log = logging.getLogger(__name__)
B = BattleStatus
COUNTED = frozenset({IterationResult.SUCCESS, IterationResult.FAILURE, IterationResult.TIMEOUT})
TERMINAL = (B.COMPLETED, B.FAILED, B.CANCELLED)


class BattleRun:
    """One battle's owner: its state, its commands, its runner."""

    def __init__(self, orch: BattleControl, state: ActiveBattle) -> None:
        self.orch = orch
        self.state = state
        self.mailbox = Mailbox()
        self.scope = anyio.CancelScope()  # the runner's: a stop cancels it
        self.finished = anyio.Event()
        # What the runner took from its mailbox and has not acted on yet (its own state).
        self._pause_pending = False
        self._retry_now = False
        self._startup_failure: str | None = None  # the last iteration's, if it was one

    @property
    def task_id(self) -> str:
        return self.state.task_id

    # ------------------------------------------------------------------ commands
    def pause(self, now: bool) -> bool:
        """Ask for a pause; False when the battle is already paused (nothing to do)."""
        state = self.state
        if state.stopping:
            raise InvalidState(
                f"the battle for {self.task_id} is being "
                + ("cancelled" if state.stop_reason == "cancel" else "stopped"),
                taskId=self.task_id,
            )
        status = state.battle.status
        if status == B.PAUSED:
            return False
        if status == B.ESCALATED:
            raise InvalidState(phases.escalated_hint(state), taskId=self.task_id)
        self.mailbox.post(Pause(now))
        # Recorded even with no agent run under way yet: an iteration that began but has
        # not started its agent starts it cancelled (IterationRun, RoleRun).
        if (
            now
            and status == B.RUNNING
            and state.request_stop("pause_now")
            and state.iteration_scope is not None
        ):
            state.iteration_scope.cancel()  # the agent is ended; the loop pauses after it
        return True

    def resume(self) -> None:
        status = self.state.battle.status
        if status == B.ESCALATED:
            raise InvalidState(phases.escalated_hint(self.state), taskId=self.task_id)
        if status not in (B.PAUSED, B.BLOCKED):  # blocked: retry now, past the backoff
            raise InvalidState(
                f"the battle for {self.task_id} is {status}, not paused",
                status=status.value,
            )
        self.mailbox.post(Resume())

    def approve(self, approved: bool, note: str | None) -> None:
        status = self.state.battle.status
        if status != B.AWAITING_APPROVAL:
            raise InvalidState(
                f"the battle for {self.task_id} is {status}, not awaiting approval",
                status=status.value,
            )
        self.mailbox.post(Approve(approved, note))

    def record_answer(
        self,
        number: int | None,
        action: EscalationAction,
        guidance: str | None,
        delivery_id: str | None,
    ) -> Escalation:
        """A person's answer to the open escalation (seed 003: not idempotent), recorded
        in the battle's record with no await between the check and the write, so exactly
        one answer wins; the runner acts on it once :meth:`answered` tells it."""
        battle = self.state.battle
        escalation = battle.escalations[-1] if battle.escalations else None
        if battle.status != B.ESCALATED or escalation is None:
            raise InvalidState(
                f"the battle for {self.task_id} is {battle.status}, not escalated",
                status=battle.status.value,
            )
        if number is not None and number != escalation.number:
            raise InvalidState(
                f"escalation {number} of {self.task_id} is not the open one ({escalation.number})",
                escalation=escalation.number,
            )
        if escalation.resolution is not None:
            raise InvalidState(
                f"escalation {escalation.number} of {self.task_id} was already answered "
                f"({escalation.resolution.action})",
                escalation=escalation.number,
            )
        escalation.resolution = EscalationResolution(
            action=action,
            guidance=guidance.strip()[:8000] if guidance and guidance.strip() else None,
            at=utcnow(),
            delivery_id=delivery_id,
        )
        return escalation

    def answered(self) -> None:
        self.mailbox.post(Answered())

    def stop(self, reason: Stop, answer: Escalation | None = None) -> None:
        """End the runner (its agent run with it): a cancel (perhaps a person's answer to
        an escalation, which the cancel then applies), or the daemon stopping."""
        if answer is not None and answer.resolution is not None:
            answer.resolution.applied = True
        if self.state.request_stop(reason.reason):
            self.mailbox.take()  # nothing else asked of it matters any more
        self.scope.cancel()

    def _take(self) -> None:
        """Act on what waits in the mailbox at a decision point: a pause is remembered
        until it takes effect; a resume of a blocked battle skips the next wait."""
        for command in self.mailbox.take():
            self._note(command)

    def _note(self, command: Command) -> None:
        if isinstance(command, Pause):
            self._pause_pending = True
        elif isinstance(command, Resume) and self.state.battle.status == B.BLOCKED:
            self._retry_now = True
        # else: a command for a wait that already ended (an approval after a pause)

    # ------------------------------------------------------------------ the runner
    async def run(self, paused: bool = False) -> None:
        """Drive the battle to a terminal state (or leave it paused at daemon shutdown)."""
        orch, state = self.orch, self.state
        try:
            with self.scope:
                if paused:
                    await self._wait_resume()
                await self._acquire_and_loop()
        except Exception as exc:  # a bug or a broken file: the battle fails, the daemon goes on
            log.exception("battle %s in %s crashed", self.task_id, orch.repo.name)
            with anyio.CancelScope(shield=True):
                try:
                    await self._fail(f"internal error: {exc}")
                except Exception:
                    log.exception("recording the failure of %s failed too", self.task_id)
                    orch.publish(
                        ev.BattleFailed(
                            task_id=self.task_id,
                            error=f"internal error: {exc}",
                            iterations=len(state.battle.iterations),
                        )
                    )
        finally:
            with anyio.CancelScope(shield=True):
                await self._settle()

    async def _acquire_and_loop(self) -> None:
        orch, state = self.orch, self.state
        engine = orch.host
        while True:
            if not engine.slot_free():
                state.queued = True
                await orch.set_status(state, B.QUEUED)
                orch.publish(ev.BattleQueued(task_id=self.task_id, position=engine.waiting + 1))
            async with engine.slot():
                state.queued = False
                resumed = state.battle.iterations or state.battle.status == B.PAUSED
                await orch.set_status(state, B.RUNNING, paused_reason=None)
                if resumed:
                    orch.publish(
                        ev.BattleResumed(
                            task_id=self.task_id, iteration=state.progress.current_iteration
                        )
                    )
                else:
                    orch.publish(
                        ev.BattleStart(
                            task_id=self.task_id,
                            mode=state.battle.mode.value,
                            max_iterations=state.battle.max_iterations,
                        )
                    )
                done = await self._loop()
            if done:
                return
            await self._wait_resume()  # paused or escalated: wait, then take a slot again

    async def _loop(self) -> bool:
        """Run the battle's phases; True when it reached a terminal state, False when it
        paused or was escalated (it waits for a resume or an answer without a slot)."""
        orch, state = self.orch, self.state
        battle = state.battle
        while True:
            self._take()
            if self._pause_pending:
                await self._pause("paused at your request")
                return False
            config = await orch.repo.config()
            decided = await phases.apply_resolution(orch, state, config)
            if decided == "accept":
                # accepting a merge conflict: complete, the branch left for the person
                last = battle.escalations[-1] if battle.escalations else None
                merge = last is None or last.reason != "merge_conflict"
                if battle.phase != "done":
                    await phases.change_phase(orch, state, "done", "a person accepted the work")
                return await self._complete(merge=merge)
            if decided == "cancel":
                state.request_stop("cancel")
                await orch.set_status(state, B.CANCELLED)
                orch.publish(
                    ev.BattleCancelled(task_id=self.task_id, iterations=len(battle.iterations))
                )
                return True
            if battle.phase == "done":  # every phase passed before a restart (or a retried merge)
                return await self._complete()
            if await self._over_budget(config):
                return False
            await self._governed(config)
            self._take()
            if self._pause_pending:
                continue
            if battle.phase == "implementation":
                step = await self._implementation(config)
            else:
                step = await self._role(config, battle.phase)
            if step is not None:
                return step

    async def _over_budget(self, config: Config) -> bool:
        """Before an agent run: if it would pass a spending cap, pause (and ask) instead."""
        over = budget.overrun(self.orch, self.state, config)
        if over is None:
            return False
        await budget.offer_more(self.orch, self.state, over)
        await self._pause(over.reason)
        return True

    async def _implementation(self, config: Config) -> bool | None:
        """One implementation iteration; None to go on, else what ``_loop`` returns."""
        orch, state = self.orch, self.state
        battle = state.battle
        limit = battle.max_iterations or config.max_iterations_per_task
        number = max((i.number for i in battle.iterations), default=0) + 1
        verdict = await IterationRun(orch, state, number, config).run()
        if verdict.fatal:
            await self._fail(verdict.fatal)
            return True
        repeated = verdict.startup_failure is not None and (
            verdict.startup_failure == self._startup_failure
        )
        self._startup_failure = verdict.startup_failure
        if repeated:
            await self._fail(
                "the agent failed the same way twice before doing any work, so the battle "
                "stops instead of spending its iterations on it (check the agent's "
                f"configuration: `pokeralphctl config get agent`): {verdict.iteration.error}"
            )
            return True
        if verdict.completed:
            phases.clear_transient(state)
            return await self._advance("implementation")
        counted = sum(1 for i in battle.iterations if i.result in COUNTED)
        if counted >= limit:
            await self._fail(f"max iterations ({limit}) reached without completion")
            return True
        failure = verdict.api_failure
        if failure is not None:
            return await self._blocked(await phases.block(orch, state, failure, config))
        if verdict.iteration.result != IterationResult.CANCELLED:
            phases.clear_transient(state)
        self._take()
        if self._pause_pending or state.stop_reason == "pause_now":
            state.clear_pause_now()
            await self._pause(
                "paused immediately at your request"
                if verdict.iteration.result == IterationResult.CANCELLED
                else "paused at your request"
            )
            return False
        if battle.mode == ExecutionMode.HITL:
            verdict_of_person = await self._await_approval(verdict.iteration.number)
            if verdict_of_person is None:
                await self._pause("paused at your request")
                return False
            if not verdict_of_person.approved:
                note = verdict_of_person.note
                await self._pause("iteration rejected" + (f": {note}" if note else ""))
                return False
        return None

    async def _role(self, config: Config, phase: Phase) -> bool | None:
        """One verification or review run; None to go on, else what ``_loop`` returns."""
        assert phase != "implementation"
        orch, state = self.orch, self.state
        battle = state.battle
        verdict = await RoleRun(orch, state, phase, config).run()
        if verdict.fatal:
            await self._fail(verdict.fatal)
            return True
        if verdict.stopped:
            state.clear_pause_now()
            await self._pause(f"paused immediately at your request (during {phase})")
            return False
        if verdict.transient is not None:
            return await self._blocked(await phases.block(orch, state, verdict.transient, config))
        phases.clear_transient(state)
        report = verdict.report
        assert report is not None
        if verdict.passed:
            battle.findings = None
            return await self._advance(phase)
        if report.valid:  # what it asks for: for the implementer, and for the person
            battle.findings = phases.findings_of(report, phase)
        cycles = cycles_of(state, phase)
        if cycles.count >= cycles.limit:
            what = "verifications" if phase == "verification" else "reviews"
            await phases.escalate(
                orch,
                state,
                "verification_cycles" if phase == "verification" else "review_cycles",
                f"{cycles.count} {what} did not pass (the last: "
                f"{report.problem or 'changes requested'}); answer to retry with guidance, "
                "accept the work as it is, or cancel",
            )
            return False
        if report.valid:
            await phases.change_phase(
                orch, state, "implementation", f"the {phase} asked for changes"
            )
        # an unusable report: the same phase runs again (the implementer cannot act on it)
        return None

    async def _advance(self, after: Phase) -> bool | None:
        """``after`` passed: on to the next phase (None), or complete the battle (True)."""
        following = phases.next_phase(self.state.battle.phases, after)
        await phases.change_phase(self.orch, self.state, following, f"the {after} passed")
        if following == "done":
            return await self._complete()
        return None

    async def _complete(self, *, merge: bool = True) -> bool:
        """Complete the battle: True; or, for a worktree battle whose branch cannot be
        merged back, escalate to a person naming why and the files (False: it waits)."""
        owner = self.orch.host.owner
        gate = owner.start_gate if owner is not None else None
        # a slot of the start gate: a few battles land at a time when many end together
        async with gate.held() if gate is not None else contextlib.nullcontext():
            return await self._land(merge)

    async def _land(self, merge: bool) -> bool:
        orch, state = self.orch, self.state
        battle = state.battle
        if merge:
            problem = await orch.merge_back(state)
            if problem is not None:
                # the cause only: the inbox item and `battle show` say what each answer does
                await phases.escalate(orch, state, "merge_conflict", problem)
                return False
        if battle.status != B.RUNNING:
            await orch.set_status(state, B.RUNNING)
        await orch.set_status(state, B.COMPLETED)
        completion = next((i.completion for i in reversed(battle.iterations) if i.completion), None)
        orch.publish(
            ev.BattleComplete(
                task_id=self.task_id,
                iterations=len(battle.iterations),
                cost_usd=round(battle.cost_usd, 6),
                completion=completion.dump() if completion else None,
            )
        )
        return True

    # ------------------------------------------------------------------ waits
    async def _await_approval(self, number: int) -> Approve | None:
        """The person's verdict on iteration ``number``; None when the battle was paused
        while it waited."""
        orch, state = self.orch, self.state
        await orch.set_status(state, B.AWAITING_APPROVAL)
        record = state.battle.iterations[-1]
        orch.publish(
            ev.AwaitApproval(
                task_id=self.task_id,
                iteration=number,
                result=record.result.value,
                completion=record.completion.dump() if record.completion else None,
                feedback={k: v.passed for k, v in record.feedback_results.items() if not v.skipped},
                files_changed=record.files_changed,
                commit_hash=record.commit_hash,
            )
        )
        hooks = orch.host.approval_hooks
        for hook in hooks:
            await hook.opened(orch, state, number)
        answer: Approve | None = None
        while True:
            command = await self.mailbox.receive()
            if isinstance(command, Approve):
                answer = command
                break
            if isinstance(command, Pause):
                break
            self._note(command)
        for hook in hooks:
            await hook.closed(orch, state, number, answer)
        if answer is None:
            return None
        state.approval_note = answer.note  # for the next iteration's prompt
        orch.publish(
            ev.ApprovalReceived(
                task_id=self.task_id, iteration=number, approved=answer.approved, note=answer.note
            )
        )
        if answer.approved:
            await orch.set_status(state, B.RUNNING)
        return answer

    async def _wait_resume(self) -> None:
        """Paused or escalated: wait for a resume (or a person's answer)."""
        while True:
            command = await self.mailbox.receive()
            if isinstance(command, Resume | Answered):
                self._pause_pending = False
                return
            # a pause of a paused battle, a verdict on an approval that is over: nothing

    async def _blocked(self, blocked: phases.BlockedWait | None) -> bool | None:
        """Wait out a transient failure: None to run the same step again, False when the
        battle was escalated instead."""
        if blocked is None:
            return False
        await self._wait_blocked(blocked.blocked, blocked.resumed)
        return None

    async def _governed(self, config: Config) -> None:
        """Before an agent run: wait, ``blocked``, while another battle's rate limit holds
        this run's endpoint (see :mod:`pokeralphd.battle.governor`)."""
        if self._retry_now:  # a person's "retry now" waits for no one
            self._retry_now = False
            return
        wait = await phases.rate_wait(self.orch, self.state, config)
        if wait is None:
            return
        await self._wait_blocked(wait.blocked, wait.resumed, until=wait.until)

    async def _wait_blocked(
        self,
        blocked: Blocked,
        resumed: str,
        until: Callable[[anyio.Event], Awaitable[object]] | None = None,
    ) -> None:
        """Blocked until ``retry_at`` on the engine's clock (or until ``until`` returns:
        the governor's turn), or until a command comes (a resume retries now, a pause
        pauses); then back to running, as the seed's table has it."""
        orch, state = self.orch, self.state
        await orch.set_status(state, B.BLOCKED, blocked=blocked)
        orch.publish(
            ev.BattleBlocked(
                task_id=self.task_id,
                reason=blocked.reason,
                kind=blocked.kind,
                retry_at=blocked.retry_at,
                retry=blocked.retry,
                max_retries=blocked.max_retries,
                phase=state.battle.phase,
            )
        )
        if until is not None:
            await until(self.mailbox.arrived)
        else:
            clock = orch.host.clock
            await wait_or_timeout(
                self.mailbox.arrived, clock, (blocked.retry_at or 0) - clock.time()
            )
        self._take()  # while still blocked: a resume here means retry now
        await orch.set_status(state, B.RUNNING, blocked=None)
        if not self._pause_pending:
            orch.publish(ev.BattleResumed(task_id=self.task_id, reason=resumed))

    # ------------------------------------------------------------------ endings
    async def _pause(self, reason: str) -> None:
        self._pause_pending = False
        self.state.clear_pause_now()  # however it was reached, the pause took effect
        await self.orch.set_status(self.state, B.PAUSED, paused_reason=reason)
        self.orch.publish(ev.BattlePaused(task_id=self.task_id, reason=reason))

    async def _fail(self, error: str) -> None:
        orch, state = self.orch, self.state
        if state.battle.status in TERMINAL:
            return
        if state.battle.status != B.RUNNING:
            await orch.set_status(state, B.RUNNING)
        await orch.set_status(state, B.FAILED, error=error)
        orch.publish(
            ev.BattleFailed(
                task_id=self.task_id, error=error, iterations=len(state.battle.iterations)
            )
        )
        for hook in orch.host.failure_hooks:
            await hook(orch, state)

    async def _settle(self) -> None:
        """After the runner ends, the battle always has a final word: a cancel is
        recorded as cancelled; at shutdown it is left paused (resumable after the
        restart); a runner that ended any other way without a final status is recorded
        as failed."""
        orch, state = self.orch, self.state
        try:
            status = state.battle.status
            if status not in TERMINAL:
                if state.stop_reason == "cancel":
                    await orch.set_status(state, B.CANCELLED)
                    orch.publish(
                        ev.BattleCancelled(
                            task_id=self.task_id, iterations=len(state.battle.iterations)
                        )
                    )
                elif state.stop_reason == "shutdown":
                    # an escalated battle stays so: the person's answer is still awaited
                    if status not in (B.PAUSED, B.ESCALATED):
                        reason = "the daemon stopped; resume with `pokeralphctl battle resume`"
                        for step in battle_path(status, B.PAUSED):
                            await orch.set_status(
                                state, step, paused_reason=reason if step == B.PAUSED else None
                            )
                        orch.publish(ev.BattlePaused(task_id=self.task_id, reason=reason))
                else:
                    await self._fail("the battle's runner stopped unexpectedly")
            escalation = phases.open_escalation(state)
            if escalation is not None and state.battle.status in TERMINAL:
                for hook in orch.host.escalation_hooks:
                    await hook.closed(
                        orch, state, escalation, f"the battle was {state.battle.status}"
                    )
        finally:
            if state.stop_reason != "shutdown":
                orch.release(state)
            self.finished.set()
