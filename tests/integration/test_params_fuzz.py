"""Fuzz every method's params through a real daemon: a bad param is never an internal error.

For each method of ``build_table()`` a seeded generator sends 50 params (1,000 under
``POKERALPH_FUZZ=deep``, any count with ``FUZZ_EXAMPLES``): valid ones with one or two
fields spoiled (wrong types, NUL bytes, huge, negative or fractional numbers, ``1e308``,
deep nesting, non-ASCII digits in ids, ``../x``, very long strings, paths no filesystem
call takes), missing and extra fields, params by position, odd shapes.
The valid values point at a real repository, task and deliveries, so a spoiled call gets
past decoding and repository resolution into the handlers and services.

Every reply must be a well-formed JSON-RPC reply with the request's id, never ``-32603``;
an Invalid params error names a field the method has (or the unknown one it was sent);
the daemon answers ``daemon.ping`` after each method and logs no internal error. (A
battle that crashes on its own is no params error and not looked for: a fuzzed
``prd.update`` can change the battled task under it, see the branch's report.)

Set ``FUZZ_SEED`` to explore other cases (the seed is in every failure message).
Guards: ``daemon.shutdown`` only gets params that cannot decode; ``repo.register`` only
gets paths that resolve inside the test's folder (the daemon may run as root, and a
fuzzed ``/`` with ``gitInit`` must never happen); ``inbox.wait`` never waits long.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pokeralphctl.client import RequestFailed
from pokeralphd.errors import PokeralphError
from pokeralphd.server.dispatch import decode_params
from pokeralphd.server.methods import build_table
from tests.helpers import (
    FAKES,
    DaemonProcess,
    fuzz_cases,
    make_git_repo,
    read_messages,
    short_tmpdir,
)
from tests.inproc import ThreadedDaemon

TABLE = build_table()
METHODS = sorted(TABLE.methods)
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or fuzz_cases(50, 1000))  # per method
SEED = int(os.environ.get("FUZZ_SEED", "20261123"))
MAX_BODY = 900_000  # under the 1 MiB frame limit (a bigger frame closes the connection)
TASK = "001-fuzz"
ABSENT = object()


class Rpc:
    """One raw connection: send a request, read its reply (skipping event notifications)."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.sock: socket.socket = daemon.raw()
        self.next_id = 0

    def reopen(self) -> None:
        self.sock.close()
        self.sock = self.daemon.raw()

    def request(self, method: str, params: Any = ABSENT, timeout: float = 30) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not ABSENT:
            message["params"] = params
        body = json.dumps(message).encode()  # NaN/Infinity go out as such: -32700 then
        self.sock.sendall(body + b"\n")
        while True:
            reply = read_messages(self.sock, 1, timeout=timeout)[0]
            if isinstance(reply, dict) and "method" in reply and "id" not in reply:
                continue  # an event of a subscription made by a fuzzed events.subscribe
            assert isinstance(reply, dict), reply
            return reply

    def call(self, method: str, params: Any = ABSENT) -> Any:
        reply = self.request(method, params)
        assert "result" in reply, (method, params, reply)
        return reply["result"]


class World:
    """The daemon and what valid params point at: a repository, a task, deliveries."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.repo = make_git_repo(home / "repo")
        make_git_repo(home / "other")
        (home / "plain").mkdir()
        # In this process: the params need no process boundary, and a daemon process's
        # start (an interpreter, its imports, polling for its socket) was most of the
        # module's time. Its log is captured all the same.
        self.daemon = ThreadedDaemon(home).start()
        self.rpc = Rpc(self.daemon)
        try:
            self.prepare()
        except BaseException:
            self.rpc.sock.close()
            self.daemon.stop()
            raise

    def prepare(self) -> None:
        rpc = self.rpc
        self.name = rpc.call("repo.register", {"path": str(self.repo)})["name"]
        agent = {"backend": "command", "command": str(FAKES / "fake_command")}
        rpc.call(
            "config.update",
            {
                "patch": {
                    "agent": agent,
                    "mode": "yolo",
                    "maxIterationsPerTask": 1,
                    "feedbackLoops": ["test"],
                    "feedbackCommands": {"test": "true"},
                }
            },
        )
        self.ensure_task()
        self.passive = rpc.call("inbox.create", {"title": "p", "mode": "passive"})["delivery"]
        self.answered = rpc.call("inbox.create", {"title": "a", "schema": {"type": "confirm"}})[
            "delivery"
        ]
        rpc.call("inbox.answer", {"id": self.answered["id"], "values": {"value": True}})
        form = {"type": "form", "fields": [{"name": "a", "type": "text"}]}
        self.open = rpc.call("inbox.create", {"title": "o", "mode": "blocking", "schema": form})[
            "delivery"
        ]

    def ensure_task(self) -> None:
        reply = self.rpc.request("task.get", {"taskId": TASK})
        assert reply.get("error", {}).get("code") in (None, -32002), reply
        if "error" in reply:
            self.rpc.call(
                "task.create",
                {"id": TASK, "title": "Fuzz", "description": "d", "acceptanceCriteria": ["c"]},
            )

    def restore(self) -> None:
        """Only our repository registered (a fuzzed register/unregister may change that)."""
        for entry in self.rpc.call("repo.list"):
            if entry["path"] != str(self.repo):
                self.rpc.call("repo.unregister", {"repo": entry["name"]})
        if not self.rpc.call("repo.list"):
            self.rpc.call("repo.register", {"path": str(self.repo)})
        self.ensure_task()


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    home = short_tmpdir("prz")
    w = World(home)
    try:
        yield w
    finally:
        w.rpc.sock.close()
        code = w.daemon.stop()
        logs = w.daemon.logs()
        shutil.rmtree(home, ignore_errors=True)
    assert code == 0, logs[-4000:]
    where = logs.find("internal error in ")  # the dispatcher's word for each -32603
    assert where < 0, logs[where : where + 6000]


# ----------------------------------------------------------------------------- values
def deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


UNICODE_DIGITS = [
    "\u0660\u0660\u0661-x",
    "\u06f0\u06f0\u06f1-x",
    "\uff11\uff12\uff13-x",
    "\u0966\u0966\u0967-x",
    "d_\u0661\u0662\u0663_\u0660\u0660\u0661",
    "d_1_\u0660\u0660\u0661",
    "\u0661",
]
NASTY_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "001-fuzz\x00",
    "001-fuzz\n",
    "../x",
    "..",
    ".",
    "/",
    "001-../../x",
    "001-x/y",
    "001-A",
    "01-x",
    "0000-x",
    "1000-x",
    "9" * 70 + "-x",
    "d_1_001",
    "d_0_000",
    "a_1_001",
    "d_9999999999999_001",
    "\u202e",
    "\ud7ff\ue000",
    "é" * 300,
    "x" * 70_000,
    "y" * 300_000,
    *UNICODE_DIGITS,
]
NASTY_INTS: list[Any] = [
    0,
    -1,
    1,
    2,
    99,
    100,
    101,
    65536,
    65537,
    604_800,
    604_801,
    1_000_000,
    1_000_001,
    4 << 20,
    (4 << 20) + 1,
    2**31,
    -(2**31) - 1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    -(10**30),
    10**400,
]
NASTY_FLOATS: list[Any] = [
    0.0,
    -0.0,
    0.5,
    1.0,
    -1.5,
    1e-300,
    1e10,
    1e300,
    1e308,
    -1e308,
    604800.0,
    604800.5,
    math.nan,
    math.inf,
    -math.inf,
]
WRONG_TYPES: list[Any] = [None, True, False, "1", "", [], {}, [1], {"a": 1}, 1, 1.5]
FINITE_FLOATS = [f for f in NASTY_FLOATS if math.isfinite(f)]
SHORT_STRINGS = [s for s in NASTY_STRINGS if len(s) < 100]  # for places that hold many


class Gen:
    """Seeded random params for one method."""

    def __init__(self, world: World, method: str, seed: int) -> None:
        self.world = world
        self.method = method
        self.rnd = random.Random(seed)
        self.fields = msgspec.structs.fields(TABLE.methods[method].params)
        self.names = [f.encode_name for f in self.fields]

    # -- building blocks
    def pick(self, items: list[Any]) -> Any:
        return self.rnd.choice(items)

    def text(self, size: int = 20) -> str:
        rnd = self.rnd
        alphabets = [
            "abcxyz019-_./ ",
            "\x00\x01\n\t\"\\'`$%",
            "éß漢字😀\u202e\u0660\u0663\uff11",
        ]
        chars = "".join(alphabets[: rnd.randint(1, 3)])
        return "".join(rnd.choice(chars) for _ in range(rnd.randint(0, size)))

    def json_value(self, depth: int = 3) -> Any:
        rnd = self.rnd
        kind = rnd.randrange(7 if depth > 0 else 5)
        if kind == 0:
            return self.pick(WRONG_TYPES)
        if kind == 1:
            return self.pick(NASTY_INTS)
        if kind == 2:
            return self.pick(FINITE_FLOATS)
        if kind == 3:
            return self.text()
        if kind == 4:
            return self.pick(SHORT_STRINGS)
        if kind == 5:
            return [self.json_value(depth - 1) for _ in range(rnd.randint(0, 3))]
        return {self.text(6): self.json_value(depth - 1) for _ in range(rnd.randint(0, 3))}

    def nasty(self) -> Any:
        """Anything at all."""
        rnd = self.rnd
        return self.pick(
            [
                lambda: self.pick(NASTY_STRINGS),
                lambda: self.pick(NASTY_INTS),
                lambda: self.pick(NASTY_FLOATS),
                lambda: self.pick(WRONG_TYPES),
                lambda: self.text(40),
                lambda: self.json_value(),
                lambda: self.pick([deep(50), deep(400), deep(700)]),
                lambda: [None] * rnd.choice([100, 5000]),
                lambda: {str(i): i for i in range(rnd.choice([10, 2000]))},
            ]
        )()

    def bad_paths(self) -> str:
        """Paths a filesystem call chokes on: NUL bytes, names or paths too long, ``~nobody``."""
        repo, home = str(self.world.repo), self.world.home
        return str(
            self.pick(
                [
                    f"{repo}/\x00",
                    f"{repo}/a\x00b",
                    "\x00",
                    "/\x00",
                    f"{home}/{'x' * 300}",
                    f"{repo}/{'é' * 200}",
                    f"{repo}/{'é/' * 1500}",
                    f"{repo}/{'x/' * 2100}",
                    "~nosuchuser/x",
                    "~nosuchuser",
                    f"{repo}/../../..",
                    f"{repo}/./.git/..",
                    f"{home}/{self.text(30)}",
                    "x" * 5000,
                ]
            )
        )

    def bad(self, field: msgspec.structs.FieldInfo) -> Any:
        """A wrong value for ``field``: mostly of its own type, sometimes of another."""
        held = kinds(field.type)
        if self.rnd.random() < 0.2:
            return self.nasty()
        options: list[Callable[[], Any]] = [lambda: self.pick(WRONG_TYPES)]
        if held & {"int", "bool"}:
            options += [lambda: self.pick(NASTY_INTS)] * 3 + [lambda: -self.pick(NASTY_INTS)]
            options += [lambda: self.pick(FINITE_FLOATS)]
        if "float" in held:
            options += [lambda: self.pick(NASTY_FLOATS)] * 2 + [lambda: self.pick(NASTY_INTS)]
            options += [lambda: -self.pick(NASTY_INTS)]
        if held & {"str", "literal"}:
            options += [lambda: self.pick(NASTY_STRINGS)] * 3 + [lambda: self.text(60)]
        if field.encode_name in ("repo", "path"):
            options += [self.bad_paths] * 4
        if "list" in held:
            options += [
                lambda: [self.pick(NASTY_STRINGS) for _ in range(self.rnd.randint(0, 4))],
                lambda: [self.json_value() for _ in range(self.rnd.randint(1, 3))],
                lambda: ["c"] * self.rnd.choice([1000, 1001, 100_000]),
                lambda: self.pick([deep(50), deep(700), [[]], [None]]),
            ]
        if "dict" in held:
            options += [
                lambda: self.json_value(),
                lambda: {self.pick(["value", "values", "type", "a", "line", "mode"]): self.nasty()},
                lambda: self.pick([deep(50), deep(700), {str(i): i for i in range(2000)}]),
            ]
            if field.encode_name == "schema":
                options += [self.schema] * 4
            if field.encode_name == "values":
                options += [self.answer] * 4
        return self.pick(options)()

    def schema(self) -> dict[str, Any]:
        """A feedback schema of a known type with odd members."""
        rnd = self.rnd
        kind = self.pick(["confirm", "select", "form", "rating", "other", 1, None, []])
        out: dict[str, Any] = {"type": kind}
        members = ["prompt", "options", "multiple", "fields", "max", "confirmLabel", "x"]
        for key in rnd.sample(members, rnd.randint(0, 3)):
            out[key] = self.nasty()
        if kind == "form" and rnd.random() < 0.7:
            field: dict[str, Any] = {"name": "a", "type": self.pick(["text", "number", "select"])}
            for key in rnd.sample(["name", "type", "label", "options", "required"], 2):
                field[key] = self.nasty()
            out["fields"] = [field]
        if kind == "select" and rnd.random() < 0.7:
            out["options"] = [self.pick(SHORT_STRINGS) for _ in range(rnd.randint(0, 4))]
        return out

    def answer(self) -> dict[str, Any]:
        value = self.pick(
            [
                self.nasty,
                lambda: self.pick(NASTY_INTS),
                lambda: [self.pick(["a", "b", "c"]) for _ in range(self.rnd.randint(0, 5))],
                lambda: ["a"] * 100_000,
            ]
        )()
        return {"value": value} if self.rnd.random() < 0.5 else {"values": {"a": value}}

    # -- params
    def good(self, field: msgspec.structs.FieldInfo) -> Any:
        pool = good_values(self.world, self.method, field.encode_name)
        if field.required:
            pool = [v for v in pool if v is not None]
        if field.encode_name == "path" and self.rnd.random() < 0.2:
            return f"{self.world.home}/{self.text(12)}"
        return self.pick(pool)

    def valid(self, every: bool = False) -> dict[str, Any]:
        return {
            f.encode_name: self.good(f)
            for f in self.fields
            if every or f.required or self.rnd.random() < 0.5
        }

    def params(self) -> Any:
        rnd = self.rnd
        if self.method == "daemon.shutdown":  # only params that cannot decode: never shut down
            if rnd.random() < 0.5:
                return [self.nasty() for _ in range(rnd.randint(1, 3))]
            return {self.pick(["x", "", "\x00", self.text(5) or "y"]): self.nasty()}
        roll = rnd.random()
        if roll < 0.03:
            return self.pick([None, [], {}, [None], [self.nasty()] * (len(self.names) + 1)])
        by_position = roll < 0.13
        params = self.valid(every=by_position)
        if roll < 0.2:
            return params  # valid (the handler may still refuse, as its state says)
        for _ in range(1 if rnd.random() < 0.75 else 2):
            what = rnd.random()
            if what < 0.06 and params:
                params.pop(self.pick(sorted(params)))
            elif what < 0.12 or not self.fields:
                params[self.pick(["extra", "task_id", "Repo", "", "\x00", self.text(5)])] = (
                    self.nasty()
                )
            else:
                field = self.pick(list(self.fields))
                params[field.encode_name] = self.bad(field)
        if by_position:
            return [params.get(n) for n in self.names]
        return params


def kinds(tp: Any) -> set[str]:
    """What a field holds: int, float, str, bool, list, dict, literal (Optional unwrapped)."""
    info = msgspec.inspect.type_info(tp)
    types = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    names = {
        msgspec.inspect.IntType: "int",
        msgspec.inspect.FloatType: "float",
        msgspec.inspect.StrType: "str",
        msgspec.inspect.BoolType: "bool",
        msgspec.inspect.ListType: "list",
        msgspec.inspect.DictType: "dict",
        msgspec.inspect.LiteralType: "literal",
    }
    return {names[type(t)] for t in types if type(t) in names}


def good_values(world: World, method: str, field: str) -> list[Any]:
    """Valid values of a param, so a call gets past decoding to the handler."""
    repo = str(world.repo)
    deliveries = [world.passive["id"], world.answered["id"], world.open["id"], "d_1_001"]
    pools: dict[str, list[Any]] = {
        "repo": [repo, world.name, repo + "/sub/dir", None],
        "path": [repo, str(world.home / "other"), str(world.home / "plain"), repo + "/.git"],
        "name": ["fuzz", "other", None],
        "gitInit": [False, True],
        "patch": [{"mode": "yolo"}, {"maxIterationsPerTask": 2}, {}, {"mode": None}],
        "expectedVersion": [None, 1, 2, 100],
        "prd": [
            {
                "name": "P",
                "description": "d",
                "tasks": [
                    {"id": TASK, "title": "t", "description": "d", "acceptanceCriteria": ["c"]}
                ],
            }
        ],
        "metadata": [{"version": "1.0.0"}, {"generatedBy": "x"}],
        "title": ["T", "A title"],
        "description": ["d"],
        "acceptanceCriteria": [["c"], ["a", "b"]],
        "priority": [1, 7],
        "status": ["pending", "in_progress", "completed", "open", "failed"],
        "taskId": [TASK, "002-missing", None],
        "id": (
            deliveries
            if method.startswith("inbox.")
            else ["r-000000000000", "mine"]
            if method.startswith("rules.")
            else ["500-new", "1000-new", None]
        ),
        "toolName": ["Bash", "read_file", "mcp__srv__tool"],
        "tool": ["Bash", "Read", "nope"],
        "paramPattern": [r'^\{"command":"git status"\}$', "evil", ".*"],
        "decision": ["allow", "deny"],
        "action": ["retry", "accept", "cancel"],
        "guidance": ["do it the other way", None],
        "scope": ["repo", "user"],
        "input": [{"command": "git status"}, {}, "x", None],
        "types": [["task_created"], [], None],
        "since": [0, 1, None],
        "subscription": [1, 2, None],
        "maxIterations": [1, None],
        "now": [True, False],
        "approve": [True, False],
        "note": ["n", None],
        "iteration": [1, 2, None],
        "phase": ["verification", "review"],
        "cycle": [1, 3, None],
        "offset": [0, -10, 10, None],
        "tail": [0, 5, None],
        "limit": [1024, 1],
        "body": ["b", ""],
        "schema": [{"type": "confirm"}, {"type": "rating"}, None],
        "timeoutSeconds": [1, 60.5, None],
        "values": [{"value": True}, {"values": {"a": "x"}}, {"value": 3}, {"value": ["a"]}],
        "content": ["c"],
        "type": ["comment", "highlight"],
        "target": [{"type": "line", "line": 1}, {"type": "text_range", "start": 0, "end": 3}],
        "timeout": [0, 0.01, None],
        "idea": ["an idea", None],
        "breakdown": [False, True],
        "answer": ["yes"],
        "save": [False, True],
        "merge": ["replace", "merge"],
        "mode": (
            ["passive", "interactive", "blocking"]
            if method == "inbox.create"
            else ["yolo", "hitl", None]
        ),
    }
    return pools.get(field, [None])


def confined_path(value: Any, home: Path) -> bool:
    """No path outside the test's folder reaches repo.register: it may ``git init`` it.

    Judged on the resolved path (``{home}/../..`` is ``/``); ``~nosuchuser`` stays (it
    cannot expand), any other ``~`` goes; relative paths are refused by the daemon.
    """
    if not isinstance(value, str):
        return True
    if value.startswith("~"):
        return value.startswith("~nosuchuser")
    if not value.startswith("/"):
        return True
    real = os.path.realpath(value.replace("\x00", ""))
    inside = os.path.realpath(home)
    return real == inside or real.startswith(inside + "/")


def guarded(world: World, method: str, params: Any) -> Any:
    """``params``, or None when sending them could harm the machine or hang the test."""
    if method == "repo.register":
        path = params.get("path") if isinstance(params, dict) else None
        if isinstance(params, list) and params:
            path = params[0]
        return params if confined_path(path, world.home) else None
    if method == "inbox.wait":  # a valid wait (on the open delivery) must not last: 0 s
        try:
            wait = decode_params(TABLE.methods[method], params)
        except PokeralphError:
            return params
        timeout = getattr(wait, "timeout", None)
        if timeout is None or timeout > 0.05:
            if isinstance(params, list):
                return [*params[:1], 0, *params[2:]]
            return {**params, "timeout": 0}
    return params


def field_names(method: str) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(TABLE.methods[method].params)}


def check_reply(method: str, params: Any, reply: dict[str, Any], request_id: int) -> None:
    where = f"seed {SEED}: {method} {json.dumps(params)[:500]} -> {json.dumps(reply)[:800]}"
    assert reply.get("jsonrpc") == "2.0", where
    assert ("result" in reply) != ("error" in reply), where
    if "result" in reply:
        assert reply["id"] == request_id, where
        return
    error = reply["error"]
    assert set(error) <= {"code", "message", "data"}, where
    assert isinstance(error["code"], int) and isinstance(error["message"], str), where
    assert error["code"] != -32603, where
    if error["code"] == -32700:  # a parse error, id unknown: NaN or Infinity is not
        text = json.dumps(params)  # JSON, and nesting deeper than 128 is refused
        deep = "nested deeper than" in str(error.get("data", {}).get("detail", ""))
        assert reply["id"] is None and ("NaN" in text or "Infinity" in text or deep), where
        return
    assert error["code"] != -32600, where  # params are always an array or an object
    assert reply["id"] == request_id, where
    data = error.get("data")
    assert data is None or isinstance(data, dict), where
    if error["code"] == -32602:
        assert isinstance(data, dict), where
        if "field" not in data:  # too many params by position: no one field to name
            assert isinstance(params, list) and len(params) > len(field_names(method)), where
            assert data["expected"] == list(TABLE.methods[method].params.__struct_encode_fields__)
            return
        field = data["field"]
        assert isinstance(field, str), where
        order = TABLE.methods[method].params.__struct_encode_fields__
        named = params if isinstance(params, dict) else dict(zip(order, params, strict=False))
        allowed = set(order) | set(named)  # a param of the method, or the unknown one sent
        if method in ("config.update", "config.updateUser") and isinstance(
            named.get("patch"), dict
        ):
            allowed |= set(named["patch"])  # both name the config key they refuse
        head = field.split(".")[0].split("[")[0]
        assert field in allowed or head in allowed, where


@pytest.mark.parametrize("method", METHODS)
def test_fuzzed_params_never_make_an_internal_error(world: World, method: str) -> None:
    world.restore()
    gen = Gen(world, method, SEED + zlib.crc32(method.encode()))
    sent = 0
    for _ in range(EXAMPLES):
        params = guarded(world, method, gen.params())
        if params is None or len(json.dumps(params)) > MAX_BODY:
            continue
        reply = world.rpc.request(method, params)
        sent += 1
        check_reply(method, params, reply, world.rpc.next_id)
        if method in ("repo.register", "repo.unregister"):
            world.restore()
    if method.startswith("events."):
        world.rpc.reopen()  # drop the fuzzed subscriptions with their connection
    assert world.rpc.call("daemon.ping") == "pong"
    assert sent > EXAMPLES // 2  # the guards and the size cap leave most cases sent


# ----------------------------------------------------------------------------- findings
# Each finding of the fuzzing attack once more through the socket, by itself.
def error_of(world: World, method: str, params: Any, timeout: float = 30) -> dict[str, Any]:
    reply = world.rpc.request(method, params, timeout)
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def test_json_nested_too_deep_is_a_parse_error_and_the_daemon_lives(world: World) -> None:
    nested = b"[" * 5000 + b"]" * 5000
    one = b'{"jsonrpc":"2.0","id":7,"method":"daemon.ping","params":{"a":' + nested + b"}}"
    with world.daemon.raw() as sock:
        sock.sendall(one + b"\n" + b"[" + one + b"]\n")
        replies = read_messages(sock, 2)
        assert [r["error"]["code"] for r in replies] == [-32700, -32700]
        sock.sendall(b'{"jsonrpc":"2.0","id":8,"method":"daemon.ping"}\n')
        assert read_messages(sock, 1)[0]["result"] == "pong"


def test_a_nul_byte_in_a_path_is_invalid_params(world: World) -> None:
    world.restore()
    repo = str(world.repo)
    error = error_of(world, "repo.register", {"path": f"{repo}/a\x00b"})
    assert error["code"] == -32602 and error["data"]["field"] == "path"
    for method in ("task.list", "repo.status", "inbox.list", "battle.current", "config.get"):
        error = error_of(world, method, {"repo": f"{repo}\x00"})
        assert error["code"] == -32602 and error["data"]["field"] == "repo", method


@pytest.mark.parametrize("tail", ["x" * 300, "é" * 200, "é/" * 1500])
def test_a_path_too_long_for_the_filesystem_is_no_repository(world: World, tail: str) -> None:
    error = error_of(world, "repo.register", {"path": f"{world.home}/{tail}"})
    assert error["code"] == -32001 and "too long" in error["message"]


def test_a_home_that_does_not_exist_is_no_repository(world: World) -> None:
    error = error_of(world, "repo.register", {"path": "~nosuchuser/repo"})
    assert error["code"] == -32001 and error["data"]["path"] == "~nosuchuser/repo"


@pytest.mark.parametrize("iteration", [0, -1, -(2**40)])
def test_battle_log_of_an_iteration_below_one(world: World, iteration: int) -> None:
    world.restore()
    error = error_of(world, "battle.log", {"taskId": TASK, "iteration": iteration})
    assert error["code"] == -32602 and error["data"]["field"] == "iteration"


@pytest.mark.parametrize("seconds", [1e308, 1e12, 604_801, 10**30])
def test_inbox_timeouts_are_at_most_a_week(world: World, seconds: float) -> None:
    world.restore()
    schema = {"type": "confirm"}
    error = error_of(
        world, "inbox.create", {"title": "t", "schema": schema, "timeoutSeconds": seconds}
    )
    assert error["code"] == -32602 and error["data"]["field"] == "timeoutSeconds"
    # The reply comes at once (a daemon that takes the timeout makes this read time out).
    error = error_of(world, "inbox.wait", {"id": world.open["id"], "timeout": seconds}, 10)
    assert error["code"] == -32602 and error["data"]["field"] == "timeout"


def test_a_week_long_blocking_delivery_is_fine(world: World) -> None:
    world.restore()
    params = {"title": "t", "mode": "blocking", "schema": {"type": "confirm"}}
    delivery = world.rpc.call("inbox.create", {**params, "timeoutSeconds": 604_800})["delivery"]
    assert delivery["timeoutAt"] > delivery["createdAt"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"title": "t"}, "needs a schema"),
        ({"title": "t", "mode": "blocking"}, "needs a schema"),
        ({"title": "t", "mode": "passive", "schema": {"type": "confirm"}}, "takes no schema"),
    ],
)
def test_a_schema_that_does_not_fit_the_mode_is_named(
    world: World, params: dict[str, Any], message: str
) -> None:
    world.restore()
    error = error_of(world, "inbox.create", params)
    assert error["code"] == -32602 and error["data"]["field"] == "schema"
    assert message in error["message"]


def test_task_numbers_go_on_past_999(daemon: DaemonProcess, repo: Path) -> None:
    daemon.call("repo.register", {"path": str(repo)})
    task = {"description": "d", "acceptanceCriteria": ["c"]}
    daemon.call("task.create", {"id": "999-last", "title": "Last", **task})
    created = daemon.call("task.create", {"title": "One more", **task})["task"]
    assert created["id"] == "1000-one-more"  # was -32603: NNN overflowed three digits
    assert daemon.call("task.get", {"taskId": "1000-one-more"})["task"]["title"] == "One more"
    assert daemon.call("battle.history", {"taskId": "1000-one-more"})["battle"] is None
    with pytest.raises(RequestFailed) as info:
        daemon.call("task.get", {"taskId": "0999-last"})
    assert info.value.code == -32602 and info.value.data["field"] == "taskId"


@pytest.mark.parametrize(
    "digits", ["\u0660\u0660\u0661", "\uff11\uff12\uff13", "\u0966\u0966\u0967"]
)
def test_ids_with_non_ascii_digits_are_invalid_params(world: World, digits: str) -> None:
    world.restore()
    task = {"title": "t", "description": "d", "acceptanceCriteria": ["c"]}
    error = error_of(world, "task.create", {"id": f"{digits}-x", **task})
    assert error["code"] == -32602 and error["data"]["field"] == "id"
    error = error_of(world, "inbox.get", {"id": f"d_{digits}_{digits}"})
    assert error["code"] == -32602 and error["data"]["field"] == "id"
