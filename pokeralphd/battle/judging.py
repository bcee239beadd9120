"""Judging an iteration: the agent's own words, skipped loops, and what the next prompt
must be told about a completion claim that was not accepted. Pure helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphd.battle.completion import completion_problems
from pokeralphd.domain.models import FeedbackResult
from pokeralphd.domain.statuses import IterationResult

if TYPE_CHECKING:
    from pokeralphd.agents.base import AgentOutcome
    from pokeralphd.domain.models import CompletionSignal, Iteration


def agent_words(outcome: AgentOutcome) -> list[str]:
    """What the agent said itself (assistant text and its final result), never tool output.
    A plain-text agent's lines are one text (a completion block or a report it prints
    spans many of them); a streaming agent's messages stay apart."""
    texts = ["\n".join(outcome.texts)] if outcome.by_lines else list(outcome.texts)
    if outcome.result is not None and outcome.result.text:
        texts.append(outcome.result.text)
    return texts


def output_summary(outcome: AgentOutcome | None, last_text: str) -> str:
    """The iteration record's ``output``: the agent's final word, trimmed."""
    text = last_text
    if outcome is not None and outcome.result is not None and outcome.result.text:
        text = outcome.result.text
    elif outcome is not None and outcome.texts:
        text = outcome.texts[-1]
    return text.strip()[-2000:]


def skipped_loop(name: str) -> FeedbackResult:
    return FeedbackResult(
        passed=True,
        skipped=True,
        output=f"skipped: no '{name}' command found in this repository; "
        f'set one with `pokeralphctl config set feedbackCommands.{name} "CMD"`',
    )


def rejected_claim_reasons(
    outcome: AgentOutcome | None,
    completion: CompletionSignal | None,
    feedback: dict[str, FeedbackResult],
    record: Iteration,
) -> list[str]:
    """Why a completion claim was not accepted, for the next iteration's prompt."""
    problems = completion_problems(agent_words(outcome)) if outcome is not None else []
    failed = [name for name, r in feedback.items() if not r.passed and not r.skipped]
    if completion is not None and failed:
        problems.append(
            "You signalled completion, but these feedback loops failed: "
            + ", ".join(failed)
            + ". The task is not complete until they pass."
        )
    if completion is not None and record.result != IterationResult.SUCCESS:
        problems.append(
            f"You signalled completion, but the run ended with an error: {record.error}"
        )
    return problems


def sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a task group wrapped (so ``except AgentError`` works), else the group."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else group
