"""What a person (or a hook) asks of a running battle, as messages to its owner.

A control call never flips a flag that the runner polls: it posts one of these
commands into the battle's :class:`Mailbox`, and the battle's owner
(:class:`pokeralphd.battle.run.BattleRun`) acts on it at its next decision point: before a
step, after an iteration, in the approval wait, while paused, escalated or blocked.

Two commands cannot wait for a decision point because the runner may be inside an agent
run for minutes: an immediate pause and a stop (cancel, shutdown). Their message is
delivered by cancelling the scope the runner is in (the owner does that when they are
posted); the command still goes through the mailbox, so the order in which a battle sees
what was asked of it is the order it was asked.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

import anyio

from pokeralphd.errors import InvalidState

MAX_PENDING = 64  # commands waiting for the runner, at most (a client loop cannot grow it)


@dataclass(frozen=True, slots=True)
class Pause:
    """Pause the battle: after the running iteration, or (``now``) at once."""

    now: bool = False


@dataclass(frozen=True, slots=True)
class Resume:
    """Go on: a paused battle takes a slot again; a blocked one retries at once."""


@dataclass(frozen=True, slots=True)
class Approve:
    """A person's verdict on the iteration awaiting approval (with a note for the next)."""

    approved: bool
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Answered:
    """A person answered the open escalation (the answer is in the battle's record)."""


@dataclass(frozen=True, slots=True)
class Stop:
    """End the runner: a cancel, or the daemon's shutdown (the battle is left paused)."""

    reason: Literal["cancel", "shutdown"]


Command = Pause | Resume | Approve | Answered | Stop


class Mailbox:
    """The battle's commands, in the order they were posted, until its runner takes them.

    Bounded (:data:`MAX_PENDING`): a client cannot make the daemon hold more; past it a
    post is refused. ``arrived`` is set while anything is waiting, so a wait that has
    other ways to end (a timeout, the rate-limit governor's turn) can end on a command too.
    """

    __slots__ = ("_arrived", "_queue")

    def __init__(self) -> None:
        self._queue: deque[Command] = deque()
        self._arrived = anyio.Event()

    def post(self, command: Command) -> None:
        if len(self._queue) >= MAX_PENDING:
            raise InvalidState(
                f"{MAX_PENDING} commands already wait for this battle to act on them; "
                "wait for it to catch up",
                limit=MAX_PENDING,
            )
        self._queue.append(command)
        self._arrived.set()

    @property
    def arrived(self) -> anyio.Event:
        """Set while a command is waiting (a fresh event once they are all taken)."""
        return self._arrived

    def take(self) -> list[Command]:
        """Every waiting command, oldest first."""
        taken = list(self._queue)
        self._queue.clear()
        if self._arrived.is_set():
            self._arrived = anyio.Event()
        return taken

    async def receive(self) -> Command:
        """The oldest waiting command, once there is one."""
        while not self._queue:
            await self._arrived.wait()
        command = self._queue.popleft()
        if not self._queue:
            self._arrived = anyio.Event()
        return command

    def __len__(self) -> int:
        return len(self._queue)
