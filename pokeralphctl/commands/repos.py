"""``pokeralphctl repos``, ``init`` and ``unregister``: which repositories the daemon serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pokeralphctl import codes
from pokeralphctl.client import RequestFailed
from pokeralphctl.commands import CommandError, repo_argument
from pokeralphctl.commands.status import battle_summary
from pokeralphctl.output import clean, counts

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_repos(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=list_repos)


def add_init(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", metavar="PATH", help="the repository (default: .)")
    parser.add_argument("--name", help="short name (default: the folder's name)")
    parser.add_argument(
        "--git-init", action="store_true", help="run `git init` first if PATH is not a git repo"
    )
    parser.set_defaults(handler=init)


def add_unregister(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", nargs="?", metavar="REPO", help="name or path (default: --repo, else .)"
    )
    parser.set_defaults(handler=unregister)


def list_repos(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl repos``."""
    repos = ctx.call("repo.list")
    out = ctx.out
    if out.json:
        out.ok(repos)
        return 0
    if not repos:
        out.line("no repositories: register one with `pokeralphctl init [PATH]`")
        return 0
    rows = []
    for repo in repos:
        if repo["error"]:
            error = out.style(clean(repo["error"]), "red")
            rows.append([clean(repo["name"]), clean(repo["path"]), "-", error, "-"])
        else:
            rows.append(
                [
                    clean(repo["name"]),
                    clean(repo["path"]),
                    clean(repo.get("prd") or "-"),
                    counts(repo.get("tasks")),
                    battle_summary(out, repo.get("battle")),
                ]
            )
    out.table(["name", "path", "prd", "tasks", "battle"], rows)
    return 0


def init(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl init``."""
    path = ctx.term.abspath(args.path or ".")
    params: dict[str, object] = {"path": path}
    if args.name:
        params["name"] = args.name
    if args.git_init:
        params["gitInit"] = True
    try:
        result = ctx.call("repo.register", params)
    except RequestFailed as exc:
        if exc.code == codes.NOT_A_GIT_REPO:
            raise CommandError(
                f"{path} is not a git repository",
                f"run `pokeralphctl init --git-init {args.path or '.'}` to create it, "
                "or `git init` there first",
                code=exc.code,
                data=exc.data,
            ) from exc
        raise
    if ctx.out.json:
        ctx.out.ok(result)
        return 0
    name, path = clean(result["name"]), clean(result["path"])
    ctx.out.line(f"registered {ctx.out.style(name, 'bold')} at {path}")
    ctx.out.note(
        "next: add a task with `pokeralphctl task add TITLE -d DESCRIPTION -c CRITERION`", "dim"
    )
    return 0


def unregister(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl unregister``."""
    target = repo_argument(ctx.term, args.target) if args.target else ctx.repo
    result = ctx.call("repo.unregister", {"repo": target} if target else {})
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        ctx.out.line(clean(f"unregistered {result['name']} ({result['path']}); its files stay"))
    return 0
