"""A client of the MCP tasks extension (SEP-2663) on the official SDK's public API only.

:class:`TasksClientExtension` is what ``mcp.Client(extensions=[...])`` takes: it lists
``io.modelcontextprotocol/tasks`` in every request's capabilities and claims the
``resultType: "task"`` answer of ``tools/call`` (:class:`CreatedTask`); ``call_tool``
then polls ``tasks/get`` until the task is terminal and returns its ``CallToolResult``.
:func:`task_request` sends ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` by hand
(``Mcp-Name`` is the task id, as SEP-2663 asks) and returns the wire result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from mcp.client import ClientSession
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
WIRE = TypeAdapter(dict[str, Any])


class CreatedTask(types.Result):
    """``CreateTaskResult``: a ``Task`` with ``resultType: "task"``."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskIdParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


class TaskRequest(types.Request[TaskIdParams, str]):
    """``tasks/get``, ``tasks/update`` or ``tasks/cancel``."""

    method: str
    params: TaskIdParams
    name_param = "taskId"


async def task_request(
    session: ClientSession, method: str, task_id: str, input_responses: Any = None
) -> dict[str, Any]:
    """Send ``method`` for ``task_id``; the result as sent (wire form)."""
    params = TaskIdParams(task_id=task_id, input_responses=input_responses)
    return await session.send_request(TaskRequest(method=method, params=params), WIRE)


async def poll(session: ClientSession, task_id: str) -> dict[str, Any]:
    """``tasks/get`` until the task is terminal; its last state."""
    while True:
        state = await task_request(session, "tasks/get", task_id)
        if state["status"] in TERMINAL:
            return state
        await asyncio.sleep(0.05)  # not the suggested interval: the tests wait less


async def _resolve(created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    state = await poll(ctx.session, created.task_id)
    if state["status"] != "completed":
        raise RuntimeError(f"task {created.task_id} ended {state['status']}: {state}")
    return types.CallToolResult.model_validate(state["result"])


class TasksClientExtension(ClientExtension):
    """Lists the tasks extension; ``call_tool`` resolves a task by polling it."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve)]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process: a task's worker, say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}
