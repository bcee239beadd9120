"""Result schemas of every method, for the OpenRPC document.

Results are built from the domain documents (whose JSON Schemas pydantic gives) and a
few plain shapes; ``tests/unit/test_contract.py`` checks every method has one, and the
integration tests check real results against them where it matters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic.json_schema import models_json_schema

from pokeralphd.domain.inbox import Annotation, Delivery, Feedback, IndexEntry
from pokeralphd.domain.models import PRD, Battle, Config, Progress, Task

if TYPE_CHECKING:
    from pydantic import BaseModel

MODELS: list[type[BaseModel]] = [
    Config,
    PRD,
    Task,
    Battle,
    Progress,
    Delivery,
    Feedback,
    Annotation,
    IndexEntry,
]
REF = "#/components/schemas/{model}"

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
NUM: dict[str, Any] = {"type": "number"}
BOOL: dict[str, Any] = {"type": "boolean"}
OBJ: dict[str, Any] = {"type": "object"}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": REF.format(model=name)}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def obj(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


REPO = obj(
    name=STR,
    path=STR,
    error=nullable(STR),
    prd=nullable(STR),
    prdVersion=INT,
    tasks={"type": "object", "additionalProperties": INT},
    battle=nullable(OBJ),
)
TRUST = obj(
    trusted=BOOL,
    hash=STR,
    trustedHash=nullable(STR),
    sensitiveKeys=array(STR),
    ignoredKeys=array(STR),
    message=nullable(STR),
    hint=nullable(STR),
)
CONFIG = obj(
    config=ref("Config"),
    sources={"type": "object", "additionalProperties": STR},
    repoLayer=OBJ,
    version=INT,
    trust=TRUST,
)
TRUST_CHANGE = obj(repo=STR, path=STR, changed=BOOL, trust=TRUST, sensitiveValues=OBJ)
TASK = obj(task=ref("Task"), version=INT)
BATTLE = obj(battle=ref("Battle"))
PLANNING = obj(
    state={"enum": ["idle", "planning", "waiting_input", "completed"]},
    idea=nullable(STR),
    breakdown=BOOL,
    sessionId=nullable(STR),
    questions=array(STR),
    deliveryId=nullable(STR),
    prd=nullable(OBJ),
    problems=array(OBJ),
    error=nullable(STR),
    turns=INT,
    lastOutput=STR,
)

RESULTS: dict[str, dict[str, Any]] = {
    "daemon.ping": {"const": "pong"},
    "daemon.status": obj(
        version=STR,
        pid=INT,
        uptime=NUM,
        socket=STR,
        activated=BOOL,
        repositories=array(REPO),
        clients=INT,
        seq=INT,
        epoch=STR,
    ),
    "daemon.shutdown": obj(stopping=BOOL),
    "rpc.discover": {"type": "object", "description": "this OpenRPC document"},
    "repo.register": REPO,
    "repo.unregister": obj(name=STR, path=STR),
    "repo.list": array(REPO),
    "repo.status": REPO,
    "config.get": CONFIG,
    "config.update": CONFIG,
    "config.trust": TRUST_CHANGE,
    "config.untrust": TRUST_CHANGE,
    "config.trustList": obj(repos=array(obj(repo=STR, path=STR, trust=TRUST, error=STR))),
    "prd.get": obj(prd=nullable(ref("PRD")), version=INT),
    "prd.update": obj(prd=ref("PRD"), version=INT),
    "task.list": obj(tasks=array(ref("Task")), version=INT),
    "task.get": TASK,
    "task.create": TASK,
    "task.update": TASK,
    "task.delete": obj(taskId=STR, version=INT),
    "events.subscribe": obj(
        subscription=INT, seq=INT, epoch=STR, replayed=INT, lost=INT, oldestSeq=INT
    ),
    "events.unsubscribe": obj(unsubscribed=array(INT)),
    "battle.start": obj(battle=ref("Battle"), queued=BOOL),
    "battle.pause": obj(battle=ref("Battle"), pauseRequested=BOOL),
    "battle.resume": BATTLE,
    "battle.cancel": BATTLE,
    "battle.approve": obj(battle=ref("Battle"), approved=BOOL),
    "battle.current": obj(
        battles=array(
            obj(
                repo=STR,
                taskId=STR,
                status=STR,
                iteration=INT,
                mode=STR,
                maxIterations=nullable(INT),
                costUsd=NUM,
                pausedReason=nullable(STR),
            )
        ),
        engine=obj(slotsFree=INT, waiting=INT),
    ),
    "battle.progress": obj(progress=nullable(ref("Progress"))),
    "battle.history": obj(battle=nullable(ref("Battle")), version=INT),
    "battle.log": obj(iteration=INT, data=STR, offset=INT, nextOffset=INT, size=INT),
    "battle.revert": obj(taskId=STR, revertCommit=STR),
    "inbox.list": obj(items=array(ref("IndexEntry"))),
    "inbox.get": obj(
        repo=STR,
        delivery=ref("Delivery"),
        feedback=array(ref("Feedback")),
        annotations=array(ref("Annotation")),
    ),
    "inbox.create": obj(repo=STR, delivery=ref("Delivery")),
    "inbox.answer": obj(repo=STR, feedback=ref("Feedback")),
    "inbox.annotate": obj(annotation=ref("Annotation")),
    "inbox.close": obj(delivery=ref("Delivery")),
    "inbox.wait": obj(
        status={"enum": ["answered", "closed", "timeout"]},
        id=STR,
        repo=STR,
        answer=nullable(ref("Feedback")),
    ),
    "planning.start": PLANNING,
    "planning.status": PLANNING,
    "planning.answer": PLANNING,
    "planning.reset": PLANNING,
    "planning.finish": obj(valid=BOOL, problems=array(OBJ), saved=BOOL, prd=OBJ, version=INT),
    "debug.emit": obj(published=INT, seq=INT),
}


def model_components() -> dict[str, Any]:
    """JSON Schemas of the documents results refer to, keyed by model name."""
    _, top = models_json_schema(
        [(m, "serialization") for m in MODELS], ref_template=REF, by_alias=True
    )
    return dict(top.get("$defs", {}))
