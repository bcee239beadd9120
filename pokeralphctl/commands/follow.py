"""Following a battle: ``battle start --follow`` and ``battle log [--follow]``.

Both subscribe first and act second, so nothing that happens in between is missed.
``battle log --follow`` never polls on a timer: it reads the log again from the last
offset each time an ``iteration_*`` event says the agent wrote something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphctl import codes
from pokeralphctl.client import RequestFailed
from pokeralphctl.commands.render import SHAPE_ERRORS, render
from pokeralphctl.output import clean

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context
    from pokeralphctl.commands.stream import EventStream

#: battle events that end a follow, and the exit code each gives (an escalated battle
#: waits for a person, maybe for days: the follow ends, the line says how to answer)
TERMINAL = {"battle_complete": 0, "battle_failed": 1, "battle_cancelled": 1, "battle_escalated": 3}
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
LOG_EVENTS = ["iteration_start", "iteration_output", "iteration_end", *TERMINAL]
DEFAULT_TAIL = 10


def start_and_follow(ctx: Context, args: argparse.Namespace, params: dict[str, Any]) -> int:
    """Subscribe to the task's events, start its battle, print events until it ends."""
    out = ctx.out
    task_id = params["taskId"]
    stream = ctx.stream(repo=ctx.repo, task_id=task_id)
    try:
        stream.open()
        result = ctx.call("battle.start", params)
        if out.json:
            out.ok(result)
        else:
            battle = result["battle"]
            queued = ", queued" if result.get("queued") else ""
            out.note(f"battle for {task_id} started ({clean(battle.get('mode'))}{queued})", "dim")
        return follow_events(ctx, stream, task_id)
    except KeyboardInterrupt:
        out.note(f"stopped following; the battle goes on (`pokeralphctl battle show {task_id}`)")
        raise
    finally:
        stream.close()


def follow_events(ctx: Context, stream: EventStream, task_id: str) -> int:
    out = ctx.out
    for event in stream.events():
        if out.json:
            out.ndjson(event)
        else:
            for line in render(out, event):
                out.line(line)
            out.stdout.flush()
        kind = event["type"]
        if kind in TERMINAL:
            return TERMINAL[kind]
        if kind == "await_approval" and not out.json and ctx.term.interactive():
            ask_approval(ctx, task_id, event["payload"])
    return 1


def parse_answer(answer: str) -> tuple[bool, str | None] | None:
    """``y`` approves, ``n`` rejects, any other text approves with it as the note."""
    text = answer.strip()
    if not text:
        return None
    if text.lower() in ("y", "yes"):
        return True, None
    if text.lower() in ("n", "no"):
        return False, None
    return True, text


def ask_approval(ctx: Context, task_id: str, payload: dict[str, Any]) -> None:
    """Ask on the terminal whether to approve the iteration, and tell the daemon."""
    try:
        what = f"iteration {clean(payload['iteration'])}"
    except SHAPE_ERRORS:  # not this daemon's shape: the line above showed it as it came
        what = "the iteration"
    while True:
        try:
            answer = ctx.term.ask(f"Approve {what}? [y/n/note] ")
        except EOFError:
            ctx.out.note(f"no answer: approve later with `pokeralphctl battle approve {task_id}`")
            return
        parsed = parse_answer(answer)
        if parsed is not None:
            break
    approved, note = parsed
    try:
        ctx.call("battle.approve", ctx.params(taskId=task_id, approve=approved, note=note))
    except RequestFailed as exc:  # approved elsewhere meanwhile, or the battle ended
        ctx.out.note(f"could not {'approve' if approved else 'reject'}: {exc.message}", "red")
        return
    if not approved:
        ctx.out.note(f"rejected: the battle pauses (`pokeralphctl battle resume {task_id}`)")


# --------------------------------------------------------------------------- logs


def next_offset(result: dict[str, Any]) -> int:
    if isinstance(result.get("nextOffset"), int):
        return int(result["nextOffset"])
    return int(result.get("offset", 0)) + len(str(result.get("data", "")).encode())


def read_log(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """The log as asked: the last ``tail`` lines, or all of it, read in pieces."""
    result: dict[str, Any] = ctx.call("battle.log", params)
    if params.get("tail") is not None:
        return result
    pieces = [result["data"]]
    first = result.get("offset", 0)
    offset = next_offset(result)
    while result["data"] and offset < result.get("size", 0):
        more = {**params, "iteration": result["iteration"], "offset": offset}
        result = ctx.call("battle.log", more)
        pieces.append(result["data"])
        offset = next_offset(result)
    return {**result, "data": "".join(pieces), "offset": first, "nextOffset": offset}


class LogFollower:
    """Prints one task's log as it grows, iteration after iteration."""

    def __init__(self, ctx: Context, task_id: str) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.iteration: int | None = None
        self.offset = 0

    def emit(self, result: dict[str, Any]) -> None:
        if not result.get("data"):
            return
        if self.ctx.out.json:
            self.ctx.out.ndjson(
                {
                    "iteration": result.get("iteration"),
                    "offset": result.get("offset"),
                    "data": result["data"],
                }
            )
        else:
            self.ctx.out.write(result["data"])

    def switch(self, iteration: int) -> None:
        if self.iteration is not None:
            self.drain()
            if not self.ctx.out.json:
                self.ctx.out.note(f"-- iteration {iteration} --", "dim")
        self.iteration, self.offset = iteration, 0

    def drain(self) -> None:
        """Print what was written since the last read."""
        if self.iteration is None:
            return
        while True:
            params = self.ctx.params(
                taskId=self.task_id, iteration=self.iteration, offset=self.offset
            )
            try:
                result = self.ctx.call("battle.log", params)
            except RequestFailed as exc:
                if exc.code == codes.NOT_FOUND:  # not created yet
                    return
                raise
            self.emit(result)
            new = next_offset(result)
            done = new <= self.offset or new >= result.get("size", 0)
            self.offset = max(new, self.offset)
            if done:
                return


def battle_over(ctx: Context, task_id: str, iteration: int | None) -> bool:
    """Whether nothing more will be written (the battle, or the wanted iteration, ended)."""
    battle = ctx.call("battle.history", ctx.params(taskId=task_id)).get("battle")
    if battle is None or battle.get("status") in TERMINAL_STATUSES:
        return True
    if iteration is None:
        return False
    return any(
        it.get("number") == iteration and it.get("endedAt") for it in battle.get("iterations") or []
    )


def follow_log(ctx: Context, args: argparse.Namespace, params: dict[str, Any]) -> int:
    """Print the log's last lines, then what the agent writes, until the battle ends."""
    task_id = params["taskId"]
    wanted = params.get("iteration")
    follower = LogFollower(ctx, task_id)
    stream = ctx.stream(repo=ctx.repo, task_id=task_id, types=LOG_EVENTS)
    try:
        stream.open()
        try:
            first = ctx.call("battle.log", {**params, "tail": params.get("tail") or DEFAULT_TAIL})
        except RequestFailed as exc:
            if exc.code != codes.NOT_FOUND:
                raise
        else:
            follower.emit(first)
            follower.iteration, follower.offset = first["iteration"], next_offset(first)
        if battle_over(ctx, task_id, wanted):
            follower.drain()
            return 0
        for event in stream.events():
            kind = event["type"]
            if kind in TERMINAL:
                follower.drain()
                return 0
            try:  # every iteration_* event names its iteration
                number = int(event["payload"]["iteration"])
            except SHAPE_ERRORS:  # not this daemon's shape: the next event reads on
                continue
            if wanted is not None and number != wanted:
                continue
            if follower.iteration is None or number > follower.iteration:
                follower.switch(number)
            if number == follower.iteration:
                follower.drain()
            if kind == "iteration_end" and number == wanted:
                return 0
    except KeyboardInterrupt:
        return 0
    finally:
        stream.close()
    return 0
