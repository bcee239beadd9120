"""Error codes: JSON-RPC's reserved ones and pokeralph's stable application codes, and
what each means (the enum itself is :mod:`pokeralph_core.codes`, shared with the agent).

Application codes live in the implementation-defined range -32000..-32099 and never
change meaning once published; ``shared/openrpc.json`` lists them for clients, and
``pokeralphctl/codes.py`` has them as plain ints for the standard-library client (both
generated from here by ``python -m pokeralphd.contract``).
"""

from __future__ import annotations

from pokeralph_core.codes import ErrorCode

__all__ = ["ERROR_DESCRIPTIONS", "ErrorCode"]


ERROR_DESCRIPTIONS: dict[ErrorCode, str] = {
    ErrorCode.PARSE_ERROR: "Invalid JSON was received.",
    ErrorCode.INVALID_REQUEST: "The JSON sent is not a valid Request object.",
    ErrorCode.METHOD_NOT_FOUND: "The method does not exist.",
    ErrorCode.INVALID_PARAMS: "Invalid method parameters; data.field names the field.",
    ErrorCode.INTERNAL_ERROR: "Internal daemon error; see the daemon log.",
    ErrorCode.REPO_NOT_FOUND: "No registered repository matches; data.repo says what was asked.",
    ErrorCode.TASK_NOT_FOUND: "No task with that id in the repository's PRD.",
    ErrorCode.VERSION_CONFLICT: "expectedVersion does not match; data has expected and actual.",
    ErrorCode.ILLEGAL_TRANSITION: "The status change is not allowed by the state machine.",
    ErrorCode.CORRUPT_FILE: "A .pokeralph file is invalid; data names the file and field.",
    ErrorCode.NOT_A_GIT_REPO: "The path is not a git repository (pass gitInit to create one).",
    ErrorCode.REPO_LOCKED: "The repository is held by another daemon; data.pid names it.",
    ErrorCode.BATTLE_ACTIVE: "A battle is already active in this repository.",
    ErrorCode.NO_BATTLE: "No battle matches the request.",
    ErrorCode.STORAGE_ERROR: "A write failed (disk full, permissions); nothing changed.",
    ErrorCode.MESSAGE_TOO_LARGE: "The message exceeds the size limit; the connection is closed.",
    ErrorCode.SUBSCRIBER_OVERFLOW: "The subscriber fell too far behind; the connection is closed.",
    ErrorCode.AGENT_ERROR: "The agent could not be started or reported an error.",
    ErrorCode.NOT_FOUND: "The requested item does not exist.",
    ErrorCode.INVALID_STATE: "The request does not fit the current state.",
    ErrorCode.SHUTTING_DOWN: "The daemon is shutting down.",
    ErrorCode.DELIVERY_NOT_FOUND: "No inbox delivery with that id.",
    ErrorCode.INVALID_ANSWER: "The answer does not fit the delivery's feedback schema.",
    ErrorCode.REPLY_TOO_LARGE: "The reply exceeds the size limit; data has size, limit and "
    "a hint (ask for less: paging, limits, smaller batches).",
    ErrorCode.TOO_MANY_PENDING: "Too many long waits pending on this connection; data.limit "
    "names the bound. Wait for some to finish, or use another connection.",
    ErrorCode.TOO_MANY_CONNECTIONS: "The daemon serves as many connections as it may; this "
    "one is closed. Retry later.",
    ErrorCode.AGENT_SCOPE: "The connection is an agent's (a process of a run the daemon "
    "started): it may only ping, deliver to the inbox and wait on its own deliveries, and "
    "read its own task. data.scope names the run's kind, data.method the method refused.",
}
