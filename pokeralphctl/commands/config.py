"""``pokeralphctl config get|set|unset``: the repository's layered configuration.

Keys are dotted paths into the config (``agent.backend``); ``snake_case`` segments that
name the config's own fields are accepted and sent in the wire's camelCase, while the keys
of free-form maps (``agent.env.ANTHROPIC_API_KEY``, ``feedbackCommands.type_check``) are
sent verbatim. ``set`` parses VALUE as JSON when it parses
(numbers, booleans, lists, objects, null) and takes it as a string otherwise. Changes go
to the repository layer; ``unset`` removes a key there, so the user or default applies.
With ``--user`` each works on the user's layer instead (``config.getUser``,
``config.updateUser``): what applies to every repository, and what only it may hold
(``notify.webhooks``, whose URLs are shown redacted), so nobody has to open the file.

When the repository layer is not trusted (``pokeralphctl trust``), what it sets that would
loosen the config waits (ignored) and what only tightens applies: ``get`` shows the value
that applies and says both, on stderr.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pokeralphctl.commands import CommandError
from pokeralphctl.commands.trust import warn
from pokeralphctl.output import clean, dumps
from pokeralphctl.parsing import sub

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context


def add_config(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION")

    p = sub(subs, "get", "show the effective config and which layer set each key")
    p.add_argument("key", nargs="?", metavar="KEY", help="a dotted key like agent.backend")
    _user_flag(p, "show the user's layer and the config it makes with the defaults")
    p.set_defaults(handler=get)

    p = sub(subs, "set", "set a key in the repository layer")
    p.add_argument("key", metavar="KEY", help="a dotted key like agent.backend")
    p.add_argument("value", metavar="VALUE", help="JSON when it parses, else a string")
    _user_flag(p, "set it in the user's layer (every repository; notify.webhooks)")
    p.set_defaults(handler=set_)

    p = sub(subs, "unset", "remove a key from the repository layer (user/default applies)")
    p.add_argument("key", metavar="KEY")
    _user_flag(p, "remove it from the user's layer (the default applies)")
    p.set_defaults(handler=unset)


def _user_flag(parser: argparse.ArgumentParser, help_: str) -> None:
    parser.add_argument("--user", action="store_true", help=help_)


#: The objects of the config whose keys are its model's fields (so ``snake_case`` is
#: camel-cased, the only spelling the daemon accepts): the top level, ``agent``, the
#: roles, their ``local``, ``permissions``, ``budget``. Every other object is a free-form
#: map whose keys are data (environment variable names, loop names) and are kept as typed.
FIELD_OBJECTS = frozenset(
    {
        (),
        ("agent",),
        ("agent", "local"),
        ("roles",),
        ("roles", "verifier"),
        ("roles", "verifier", "local"),
        ("roles", "reviewer"),
        ("roles", "reviewer", "local"),
        ("permissions",),
        ("budget",),
        ("notify",),
    }
)
#: Maps whose values are strings: ``config set agent.env.DEBUG 1`` sets the string "1".
STRING_MAPS = frozenset(
    {
        ("agent", "env"),
        ("feedbackCommands",),
        ("roles", "verifier", "env"),
        ("roles", "reviewer", "env"),
    }
)
#: Lists that may be given comma-separated: ``config set phases implementation,review``.
COMMA_LISTS = frozenset({("phases",), ("feedbackLoops",), ("notify", "events")})


def camel(segment: str) -> str:
    head, *rest = segment.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def split_key(key: str) -> list[str]:
    """A dotted key's segments, field names camel-cased, map keys verbatim."""
    parts: list[str] = []
    for segment in key.strip().split("."):
        parts.append(camel(segment) if tuple(parts) in FIELD_OBJECTS else segment)
    if not all(parts):
        raise CommandError(
            f"invalid key {key!r}", "use a dotted key like agent.backend", code="usage"
        )
    return parts


def parse_value(text: str, parts: list[str] | None = None) -> Any:
    """JSON when ``text`` parses as JSON, else the text itself; always the text for an
    entry of a map of strings (an environment variable, a loop's command)."""
    if parts and tuple(parts[:-1]) in STRING_MAPS:
        return text
    try:
        return json.loads(text)
    except ValueError:
        if parts and tuple(parts) in COMMA_LISTS:
            return [item.strip() for item in text.split(",") if item.strip()]
        return text


def nested_patch(parts: list[str], value: Any) -> dict[str, Any]:
    """``["agent", "backend"], "demo"`` -> ``{"agent": {"backend": "demo"}}``."""
    patch: Any = value
    for part in reversed(parts):
        patch = {part: patch}
    result: dict[str, Any] = patch
    return result


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted keys and their leaf values (empty objects stay leaves)."""
    if isinstance(value, dict) and value:
        out: list[tuple[str, Any]] = []
        for key, inner in value.items():
            out.extend(flatten(inner, f"{prefix}.{key}" if prefix else key))
        return out
    return [(prefix, value)]


def lookup(tree: Any, parts: list[str]) -> tuple[bool, Any]:
    for part in parts:
        if not isinstance(tree, dict) or part not in tree:
            return False, None
        tree = tree[part]
    return True, tree


def _ignored_keys(result: dict[str, Any]) -> list[str]:
    return [str(k) for k in result["trust"]["ignoredKeys"]]


def ignored(result: dict[str, Any], parts: list[str]) -> bool:
    """Whether the repository layer sets this key but it is ignored (not trusted)."""
    dotted = ".".join(parts)
    return (
        any(dotted == k or dotted.startswith(k + ".") for k in _ignored_keys(result))
        and (lookup(result["repoLayer"], parts)[0])
    )


def touches_ignored(result: dict[str, Any], parts: list[str]) -> bool:
    """Whether the key is, holds or lies under a key the untrusted repository layer sets."""
    dotted = ".".join(parts)
    return any(
        dotted == k or dotted.startswith(k + ".") or k.startswith(dotted + ".")
        for k in _ignored_keys(result)
    )


def source_of(result: dict[str, Any], parts: list[str]) -> str:
    """Which layer set a key: ``sources`` names top-level keys; nested keys are looked up."""
    if ignored(result, parts):
        return "user or default; repo value ignored: not trusted"
    top = result["sources"].get(parts[0], "default")
    if len(parts) == 1 or top == "default":
        return str(top)
    found, _ = lookup(result["repoLayer"], parts)
    return "repo" if found else "user or default"


def show_value(value: Any) -> str:
    return clean(value if isinstance(value, str) else dumps(value))


def get_user(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl config get --user``."""
    result = ctx.call("config.getUser")
    out = ctx.out
    if args.key is None:
        if out.json:
            out.ok(result)
            return 0
        rows = [[clean(key), show_value(value)] for key, value in flatten(result["layer"])]
        out.table(["key", "value"], rows)
        out.note(f"({clean(str(result['path']))}, version {result['version']})", "dim")
        return 0
    parts = split_key(args.key)
    found, value = lookup(result["config"], parts)
    if not found:
        raise CommandError(f"no config key {args.key!r}", data={"key": args.key})
    source = "user" if lookup(result["layer"], parts)[0] else "default"
    if out.json:
        out.ok({"key": ".".join(parts), "value": value, "source": source})
    else:
        out.line(f"{show_value(value)}  {out.style(f'({source})', 'dim')}")
    return 0


def _set_user(ctx: Context, parts: list[str], value: Any) -> int:
    result = ctx.call("config.updateUser", {"patch": nested_patch(parts, value)})
    if ctx.out.json:
        ctx.out.ok(result)
        return 0
    found, now = lookup(result["config"], parts)
    shown = show_value(now) if found else "(not set)"
    where = f"user layer, version {result['version']}"
    ctx.out.line(f"{clean('.'.join(parts))} = {shown}  " + ctx.out.style(f"({where})", "dim"))
    return 0


def get(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl config get``."""
    if args.user:
        return get_user(ctx, args)
    result = ctx.call("config.get", ctx.params())
    out = ctx.out
    config = result["config"]
    if args.key is None:
        if out.json:
            out.ok(result)
            return 0
        rows = [
            [clean(key), show_value(value), out.style(source_of(result, key.split(".")), "dim")]
            for key, value in flatten(config)
        ]
        out.table(["key", "value", "source"], rows)
        warn(out, result["trust"])
        return 0
    parts = split_key(args.key)
    found, value = lookup(config, parts)
    if not found and ignored(result, parts):
        raise CommandError(
            f"{args.key} is set only by the repository's config, which is not trusted: "
            "it is ignored",
            "read .pokeralph/config.json, then run `pokeralphctl trust`",
            data={"key": args.key, "trust": result["trust"]},
        )
    if not found:
        raise CommandError(
            f"no config key {args.key!r}",
            "`pokeralphctl config get` lists every key; known top-level keys: " + ", ".join(config),
            data={"key": args.key},
        )
    source = source_of(result, parts)
    if out.json:
        out.ok({"key": ".".join(parts), "value": value, "source": source})
    else:
        out.line(f"{show_value(value)}  {out.style(f'({source})', 'dim')}")
        if touches_ignored(result, parts):
            warn(out, result["trust"])
    return 0


def _update(ctx: Context, parts: list[str], value: Any) -> dict[str, Any]:
    result: dict[str, Any] = ctx.call("config.update", ctx.params(patch=nested_patch(parts, value)))
    return result


def set_(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl config set``."""
    parts = split_key(args.key)
    value = parse_value(args.value, parts)
    if args.user:
        return _set_user(ctx, parts, value)
    result = _update(ctx, parts, value)
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        where = f"repo layer, version {result['version']}"
        if ignored(result, parts):  # written, but not in effect
            shown, where = show_value(value), where + ", ignored: not trusted"
        else:
            shown = show_value(lookup(result["config"], parts)[1])
        ctx.out.line(f"{clean('.'.join(parts))} = {shown}  " + ctx.out.style(f"({where})", "dim"))
        warn(ctx.out, result["trust"])
    return 0


def unset(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl config unset``."""
    parts = split_key(args.key)
    if args.user:
        return _set_user(ctx, parts, None)
    result = _update(ctx, parts, None)
    if ctx.out.json:
        ctx.out.ok(result)
    else:
        found, effective = lookup(result["config"], parts)
        now = show_value(effective) if found else "(not set)"
        source = source_of(result, parts)
        ctx.out.line(f"{clean('.'.join(parts))} = {now}  " + ctx.out.style(f"({source})", "dim"))
        warn(ctx.out, result["trust"])
    return 0
