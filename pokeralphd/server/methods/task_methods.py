"""``task.*``: list, get, create, update and delete the PRD's tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphd.domain.statuses import TaskStatus
from pokeralphd.errors import InvalidParams
from pokeralphd.protocol.params import (
    TaskCreateParams,
    TaskDeleteParams,
    TaskListParams,
    TaskRef,
    TaskUpdateParams,
)
from pokeralphd.protocol.results import TaskDeleteResult, TaskListResult, TaskResult

if TYPE_CHECKING:
    from pokeralphd.server.context import CallContext
    from pokeralphd.server.dispatch import MethodTable


def _status(value: str, field: str = "status") -> TaskStatus:
    try:
        return TaskStatus(value)
    except ValueError as exc:
        allowed = ", ".join(s.value for s in TaskStatus)
        raise InvalidParams(f"{field} must be one of {allowed}", field=field) from exc


def register(table: MethodTable) -> None:
    @table.add(
        "task.list",
        TaskListParams,
        "Tasks of the PRD, in priority order; filter by status.",
        result=TaskListResult,
    )
    async def list_(ctx: CallContext, params: TaskListParams) -> TaskListResult:
        prd, version = await ctx.repos.resolve(params.repo).store.prd()
        tasks = sorted(prd.tasks if prd else [], key=lambda t: (t.priority, t.id))
        if params.status is not None:
            wanted = _status(params.status)
            tasks = [t for t in tasks if t.status == wanted]
        return TaskListResult(tasks=[t.dump() for t in tasks], version=version)

    @table.add("task.get", TaskRef, "One task.", result=TaskResult, agent=True)
    async def get(ctx: CallContext, params: TaskRef) -> TaskResult:
        repo = ctx.own_repo(params.repo)
        task_id = ctx.own_task(params.task_id)
        assert task_id is not None  # a person named one; an agent's is its own
        task, version = await repo.store.task(task_id)
        return TaskResult(task=task.dump(), version=version)

    @table.add(
        "task.create",
        TaskCreateParams,
        "Add a task; its id NNN-slug is generated from the title unless given.",
        result=TaskResult,
    )
    async def create(ctx: CallContext, params: TaskCreateParams) -> TaskResult:
        fields: dict[str, Any] = {
            "title": params.title,
            "description": params.description,
            "acceptanceCriteria": params.acceptance_criteria,
        }
        if params.priority is not None:
            fields["priority"] = params.priority
        if params.depends_on is not None:
            fields["dependsOn"] = params.depends_on
        task, version = await ctx.repos.resolve(params.repo).store.create_task(
            fields, params.id, params.expected_version
        )
        return TaskResult(task=task.dump(), version=version)

    @table.add(
        "task.update",
        TaskUpdateParams,
        "Change a task's fields; a status change must follow the task state machine.",
        result=TaskResult,
    )
    async def update(ctx: CallContext, params: TaskUpdateParams) -> TaskResult:
        fields: dict[str, Any] = {}
        for key, value in (
            ("title", params.title),
            ("description", params.description),
            ("acceptanceCriteria", params.acceptance_criteria),
            ("priority", params.priority),
            ("dependsOn", params.depends_on),
        ):
            if value is not None:
                fields[key] = value
        if params.status is not None:
            fields["status"] = _status(params.status).value
        if not fields:
            raise InvalidParams("nothing to update", field="taskId")
        task, version = await ctx.repos.resolve(params.repo).update_task(
            params.task_id, fields, params.expected_version
        )
        return TaskResult(task=task.dump(), version=version)

    @table.add(
        "task.delete",
        TaskDeleteParams,
        "Remove a task from the PRD (its battle files stay).",
        result=TaskDeleteResult,
    )
    async def delete(ctx: CallContext, params: TaskDeleteParams) -> TaskDeleteResult:
        version = await ctx.repos.resolve(params.repo).delete_task(
            params.task_id, params.expected_version
        )
        return TaskDeleteResult(task_id=params.task_id, version=version)
