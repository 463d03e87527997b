"""The ``[[mcp]]`` client's side of the tasks extension (``io.modelcontextprotocol/tasks``).

On protocol 2026-07-28 the client lists the extension in every request's capabilities
(SEP-2663), so a server may answer a ``tools/call`` with a task (``resultType:
"task"``) instead of its result. :class:`McpTasks` (an SDK ``ClientExtension``) claims
that answer and finishes the call: it polls ``tasks/get`` at the server's
``pollIntervalMs``, answers ``input_required`` questions through the same callbacks as
a direct ``elicitation/create`` or ``sampling/createMessage`` (``tasks/update``), and
returns the task's ``CallToolResult``, so the imported tool answers as if the server
had answered at once. The whole wait counts against ``call_timeout``; a call that
times out or is cancelled sends ``tasks/cancel`` first. A task that ends ``failed`` is
the server's JSON-RPC error; one that ends ``cancelled`` is an :class:`McpCallError` of
kind ``cancelled``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, ClientRequestContext, ClientSession
from mcp.client.extension import ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

from toolproof.sources.mcp.common import McpCallError

__all__ = ["CANCEL_SECONDS", "TASKS_EXTENSION", "TERMINAL", "CreatedTask", "McpTasks"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier."""
CANCEL_SECONDS = 5.0
"""How long a call given up waits for the server's ``tasks/cancel`` acknowledgement."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""The statuses a task never leaves."""
_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


class CreatedTask(types.Result):
    """``CreateTaskResult`` (SEP-2663): a ``Task`` answered by ``tools/call``."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class _TaskState(types.Result):
    """A ``tasks/*`` result as sent (its fields kept as extras, in wire form)."""

    model_config = ConfigDict(extra="allow")


class _TaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


class _TaskRequest(types.Request[_TaskParams, str]):
    method: str
    params: _TaskParams
    name_param = "taskId"  # Mcp-Name over streamable HTTP (SEP-2663)


async def _send(
    session: ClientSession, method: str, task_id: str, responses: dict[str, Any] | None = None
) -> dict[str, Any]:
    params = _TaskParams(task_id=task_id, input_responses=responses)
    state = await session.send_request(_TaskRequest(method=method, params=params), _TaskState)
    return state.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _answers(
    session: ClientSession, asked: dict[str, Any], answered: set[str]
) -> dict[str, Any]:
    """Each new question of ``asked`` through the client's callbacks; the answers (wire)."""
    responses: dict[str, Any] = {}
    for key, raw in asked.items():
        if key in answered:
            continue
        answered.add(key)
        request = _REQUEST.validate_python(raw)
        ctx = ClientRequestContext(session=session, request_id=key, meta=None)
        answer = await session.dispatch_input_request(ctx, request)
        if isinstance(answer, types.ErrorData):
            raise MCPError.from_error_data(answer)
        responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return responses


async def _poll(
    session: ClientSession, created: CreatedTask, last: list[str]
) -> types.CallToolResult:
    """``tasks/get`` until the task is terminal (its status also appended to ``last``)."""
    answered: set[str] = set()
    interval = created.poll_interval_ms
    while True:
        await asyncio.sleep(max(interval or 0, 10) / 1000)
        state = await _send(session, "tasks/get", created.task_id)
        status, interval = state.get("status"), state.get("pollIntervalMs", interval)
        last.append(str(status))
        if status == "completed":
            return types.CallToolResult.model_validate(state.get("result"))
        if status == "failed":
            raise MCPError.from_error_data(types.ErrorData.model_validate(state.get("error")))
        if status == "cancelled":
            why = state.get("statusMessage") or "no reason given"
            raise McpCallError("cancelled", f"the server cancelled task {created.task_id}: {why}")
        if status == "input_required":
            responses = await _answers(session, state.get("inputRequests") or {}, answered)
            if responses:
                await _send(session, "tasks/update", created.task_id, responses)
                interval = 0


async def _cancel(session: ClientSession, task_id: str) -> None:
    """Send ``tasks/cancel`` even from a cancelled scope; give up after :data:`CANCEL_SECONDS`."""
    gone = (MCPError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError)
    with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS), suppress(*gone):
        await _send(session, "tasks/cancel", task_id)  # best effort: the call is given up


async def _resolve(created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    """Finish a task the server answered: poll it to its result (see the module).

    Raises:
        MCPError: the task failed (its JSON-RPC error) or a question was declined.
        McpCallError: the server cancelled the task (kind ``cancelled``).
        pydantic.ValidationError: a malformed task state or result.

    """
    last: list[str] = []
    try:
        return await _poll(ctx.session, created, last)
    finally:
        if not last or last[-1] not in TERMINAL:  # given up: the server stops the body
            await _cancel(ctx.session, created.task_id)


class McpTasks(ClientExtension):
    """The ``[[mcp]]`` client's tasks extension (see the module)."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The claim of ``tools/call``'s ``resultType: "task"`` answer."""
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve)]
