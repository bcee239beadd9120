"""The daemon's exceptions; each carries a stable JSON-RPC error code and a ``data`` dict.
The base, the file errors and :class:`InvalidParams` are the core's
(:mod:`pokeralph_core.errors`), shared with the local agent and the config it reads; they
are named here too, so the daemon has one module of errors.

::

    PokeralphError                 any error a client may see, with .code and .data
    ├── InvalidParams              a param is missing, of the wrong type, or out of range
    ├── RepoNotFound               no registered repository matches a path or name
    ├── TaskNotFound               no task with that id
    ├── VersionConflict            expectedVersion is stale
    ├── CorruptFile                a document on disk does not parse or validate
    ├── NotAGitRepo                repo.register on a folder without git
    ├── RepoLocked                 the repository belongs to another daemon
    ├── BattleActive / NoBattle    battle state does not fit the request
    ├── StorageError               a write failed (ENOSPC, EACCES); nothing changed
    ├── AgentError                 an agent backend could not start or run
    ├── NotFound / InvalidState    generic lookups and state mismatches
    └── OutOfScope                 an agent's connection asked for more than agents may
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralph_core.errors import (
    CorruptFile,
    InvalidParams,
    PokeralphError,
    StorageError,
    VersionConflict,
)
from pokeralphd.protocol.codes import ErrorCode

if TYPE_CHECKING:
    from pokeralphd.proc import AgentScope

__all__ = [
    "AgentError",
    "BattleActive",
    "CorruptFile",
    "InvalidParams",
    "InvalidState",
    "NoBattle",
    "NotAGitRepo",
    "NotFound",
    "OutOfScope",
    "PokeralphError",
    "RepoLocked",
    "RepoNotFound",
    "StorageError",
    "TaskNotFound",
    "VersionConflict",
]


class RepoNotFound(PokeralphError):
    code = ErrorCode.REPO_NOT_FOUND


class TaskNotFound(PokeralphError):
    code = ErrorCode.TASK_NOT_FOUND

    def __init__(self, task_id: str, repo: str | None = None) -> None:
        super().__init__(f"no task {task_id!r} in the PRD", taskId=task_id, repo=repo)


class NotAGitRepo(PokeralphError):
    code = ErrorCode.NOT_A_GIT_REPO


class RepoLocked(PokeralphError):
    code = ErrorCode.REPO_LOCKED


class BattleActive(PokeralphError):
    code = ErrorCode.BATTLE_ACTIVE


class NoBattle(PokeralphError):
    code = ErrorCode.NO_BATTLE


class AgentError(PokeralphError):
    code = ErrorCode.AGENT_ERROR


class NotFound(PokeralphError):
    code = ErrorCode.NOT_FOUND


class InvalidState(PokeralphError):
    code = ErrorCode.INVALID_STATE


class OutOfScope(PokeralphError):
    """An agent's connection asked for something outside its run's scope."""

    code = ErrorCode.AGENT_SCOPE

    def __init__(self, scope: AgentScope, why: str, method: str | None = None) -> None:
        super().__init__(
            f"refused: this connection is {scope.describe()}, and {why}; agents may only "
            "ping, deliver to the inbox and wait on their own deliveries, and read their "
            "own task",
            scope=scope.kind,
            **({"method": method} if method else {}),
        )
