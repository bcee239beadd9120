"""Which failed agent runs are transient (seed 003): retried after a backoff with the
battle ``blocked``, never counted as a failed iteration.

- what the agent layer already classifies (:class:`ApiFailure`): a rate limit (429), an
  overloaded API (529), a server error (5xx); and a rate limit the CLI announced with its
  reset time (Claude Code's rejected ``rate_limit_event``);
- a run that could not reach the API: a connection error in the agent's failure
  (Claude Code's "API Error: Connection error.", Codex's "stream disconnected", the
  system's ECONNRESET, ETIMEDOUT…);
- the agent's exit status 23 or 124 (the seed's transient codes; 124 is what
  ``timeout(1)`` returns). A run *we* stopped at the iteration timeout is not one of
  them: that is the agent's own slowness, and it counts.

Only a failed run is looked at (an error result or a non-zero exit), and only its final
error and stderr, never what it said while working (an agent may well talk about
connection errors in the code it fixes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pokeralphd.agents.base import ApiFailure

if TYPE_CHECKING:
    from pokeralphd.agents.base import AgentOutcome

TRANSIENT_EXIT_CODES = frozenset({23, 124})
# Whole words only: "FileNotFoundError" holds "enotfound", and an agent's own crash must
# count as its failure, not be retried as the API's.
CONNECTION_RE = re.compile(
    r"\b(?:connection error|connection (?:reset|refused|closed|timed out)|econnreset"
    r"|econnrefused|etimedout|eai_again|enotfound|socket hang up|fetch failed|network error"
    r"|stream disconnected|could not resolve host|unable to connect)\b",
    re.IGNORECASE,
)


def transient_failure(outcome: AgentOutcome) -> ApiFailure | None:
    """The transient failure ``outcome`` is, or ``None`` (a success, or the agent's own
    failure, which counts)."""
    if outcome.api_failure is not None:
        return outcome.api_failure
    if outcome.rate_limited_until is not None:  # the CLI's own rate-limit event
        return ApiFailure("rate_limit", None, "rate limited", outcome.rate_limited_until)
    if outcome.reason != "exited":
        return None
    code = outcome.exit_code
    if code in TRANSIENT_EXIT_CODES:
        return ApiFailure(
            "exit_code", None, f"the agent exited with status {code} (a transient failure)"
        )
    failed = outcome.error is not None or (outcome.result is not None and outcome.result.is_error)
    if not failed:
        return None
    # the result's text is an error's only when the result is one (else it is the agent's
    # own last words, which may well mention a connection error in the code it wrote)
    said = outcome.result.text if outcome.result and outcome.result.is_error else None
    words = " ".join(part for part in (outcome.error, said) if part)
    found = CONNECTION_RE.search(words)
    if found is None:
        return None
    return ApiFailure("connection", None, (outcome.error or words)[:500])


def describe(failure: ApiFailure) -> str:
    what = {
        "rate_limit": "rate limited",
        "overloaded": "overloaded",
        "server": "server error",
        "connection": "connection error",
        "exit_code": "transient exit status",
    }
    status = f" {failure.status}" if failure.status is not None else ""
    return f"{what[failure.kind]}{status}"
