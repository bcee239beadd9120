"""``pokeralphctl demo``: a whole battle on a sample repository, shown live.

Copies the bundled sample (a tiny Python module with two stubs and its tests) into a new
git repository, starts the daemon if none answers, registers the repository, imports its
PRD, points it at the bundled DEMO agent (an offline stand-in that speaks Claude Code's
stream-json and really edits the sample), and follows a YOLO battle to its end. The
feedback loop is the sample's real test suite. ``--pace SECONDS`` sets the agent's pause
between events (its own default, 0.05 s, is slow enough to read along; 0 is full speed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pokeralphctl.client import DaemonNotRunning
from pokeralphctl.commands import CommandError

if TYPE_CHECKING:
    from pokeralphctl.commands import Context
    from pokeralphctl.terminal import Terminal

TASK_ID = "001-implement-text-statistics"
#: the demo agent's bounds for ``--pace`` (pokeralphd.agents.demo_agent.MAX_PACE)
MAX_PACE = 5.0


def pace_seconds(text: str) -> float:
    """A ``--pace`` value: seconds in [0, MAX_PACE]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= MAX_PACE:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_PACE:g} seconds")
    return value


def agent_config(pace: float | None) -> dict[str, Any]:
    """The sample's ``agent``: the demo agent, at ``pace`` if given. Its ``extraArgs`` are
    always set, so that flags of your own for another backend (in your user config) stay
    out of it."""
    return {"backend": "demo", "extraArgs": [] if pace is None else ["--pace", f"{pace:g}"]}


def add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        default="pokeralph-demo",
        help="where to create the sample repository (default: ./pokeralph-demo, or -2, -3…)",
    )
    parser.add_argument("--hitl", action="store_true", help="approve each iteration yourself")
    parser.add_argument(
        "--pace",
        type=pace_seconds,
        metavar="SECONDS",
        help="the demo agent's pause between events (default 0.05; 0 runs at full speed)",
    )
    parser.set_defaults(handler=run)


def _fresh(path: Path) -> Path:
    candidate, n = path, 2
    while candidate.exists() and any(candidate.iterdir()):
        candidate = path.with_name(f"{path.name}-{n}")
        n += 1
    return candidate


def _git(term: Terminal, repo: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=pokeralph demo",
            "-c",
            "user.email=demo@pokeralph.invalid",
            *args,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        env=term.env,
    )


def make_sample(term: Terminal, target: Path) -> dict[str, Any]:
    """Copy the sample into ``target`` as a fresh git repository; return its PRD."""
    sample = resources.files("pokeralphd.demo") / "sample"
    target.mkdir(parents=True, exist_ok=True)
    prd: dict[str, Any] = {}
    for item in sample.iterdir():
        if item.name == "PRD.json":
            prd = json.loads(item.read_text())
        elif item.is_file() and not item.name.endswith(".pyc"):
            (target / item.name).write_bytes(item.read_bytes())
    (target / ".gitignore").write_text("__pycache__/\n")
    subprocess.run(["git", "init", "-q", str(target)], check=True, env=term.env)
    _git(term, target, "add", "-A")
    _git(term, target, "commit", "-q", "-m", "The textstats sample, with two stubs")
    return prd


def ensure_daemon(ctx: Context) -> bool:
    """Start a detached daemon when none answers; True if this call started one."""
    try:
        ctx.call("daemon.ping")
        return False
    except DaemonNotRunning:
        pass
    from pokeralphctl.commands import daemon

    quiet = argparse.Namespace(foreground=False)
    code = daemon.start(ctx, quiet)
    if code != 0:
        raise CommandError(
            "could not start pokeralphd", "run `pokeralphctl daemon start --foreground` to see why"
        )
    return True


def run(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl demo``."""
    if shutil.which("git", path=ctx.term.env.get("PATH")) is None:
        raise CommandError(
            "git is not installed", "install git, then run `pokeralphctl demo` again"
        )
    out = ctx.out
    target = _fresh(Path(ctx.term.abspath(args.directory)).resolve())
    prd = make_sample(ctx.term, target)
    out.note(f"sample repository: {target}  (a DEMO agent will edit it; no account needed)")
    ensure_daemon(ctx)
    ctx.repo = str(target)
    ctx.call("repo.register", {"path": str(target)})
    ctx.call("prd.update", ctx.params(prd=prd))
    ctx.call(
        "config.update",
        ctx.params(
            patch={
                "agent": agent_config(args.pace),
                "mode": "hitl" if args.hitl else "yolo",
                "maxIterationsPerTask": 5,
                "feedbackLoops": ["test"],
                "feedbackCommands": {"test": f"{sys.executable} -m unittest -q"},
            }
        ),
    )
    out.note(
        f"battle {TASK_ID}: the agent runs, the tests judge, git records (Ctrl-C stops following)"
    )
    from pokeralphctl.commands.follow import start_and_follow

    code = start_and_follow(ctx, args, ctx.params(taskId=TASK_ID))
    if not out.json:
        log = subprocess.run(
            ["git", "-C", str(target), "log", "--oneline", "-5"],
            capture_output=True,
            text=True,
            check=False,
            env=ctx.term.env,
        ).stdout
        out.line("")
        out.line(f"git log in {target}:")
        out.line(log.rstrip())
        out.note(
            "next: `pokeralphctl watch`, `pokeralphctl battle history "
            + TASK_ID
            + f" --repo {target}`"
        )
    return code
