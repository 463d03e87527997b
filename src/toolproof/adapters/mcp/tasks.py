"""Served tool calls as tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663).

On protocol 2026-07-28 a client that lists the extension in a request's capabilities
(``_meta["io.modelcontextprotocol/clientCapabilities"].extensions``) may get, for a
``tools/call``, a ``CreateTaskResult`` (``resultType: "task"``) at once instead of the
result; the body runs on in the server, and the client uses the ``taskId``:

* ``tasks/get``: the task's state (``working``, ``input_required`` with the body's
  pending questions as ``inputRequests``, ``completed`` with the ``CallToolResult`` as
  ``result``, ``failed`` with the JSON-RPC ``error``, or ``cancelled``);
* ``tasks/update``: answers to ``inputRequests`` (``inputResponses``, keyed ``q1``,
  ``q2``... as in :mod:`toolproof.adapters.mcp.rounds`; unknown or answered keys are
  ignored);
* ``tasks/cancel``: the body is stopped the way its backend stops a call over its
  timeout (the ``process`` backend kills the worker and what it started, ``celery``
  revokes the task with ``terminate``), and the call's outcome is a failure of kind
  ``cancelled``. A body that finished first keeps its outcome.

A task's outcome goes through the path of every served call: under ``serve --record``
the call's block (a ``cancelled`` failure included) is in the run before ``tasks/get``
reports the task terminal. Which tools are called as tasks is the server's choice
(:func:`on_task_backend` by default: those on the ``process`` or ``celery`` backends).
A client without the extension, or on protocol 2025-11-25 (whose core ``tasks``
feature the SDK does not serve), gets the ordinary answer.

Tasks live in the server's memory, ``ttlMs`` (:data:`TASK_TTL_SECONDS`) from their
creation: a task still running then is cancelled, and its id is forgotten. A task
answers only the principal that created it (a named client token's, see
:func:`~toolproof.adapters.mcp.server.client_principal`); to anyone else it does not
exist. Log messages and progress of a task's body are not sent (the extension does not
carry them).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from toolproof.adapters.mcp.relay import LogLevels, RequestChannel
from toolproof.adapters.mcp.rounds import RoundsChannel, _Suspended
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.failures import FailureKind, FailureWhere
from toolproof.tools.tool import Tool

__all__ = [
    "POLL_INTERVAL_MS",
    "TASKS_EXTENSION",
    "TASK_BACKENDS",
    "TASK_TTL_SECONDS",
    "TaskParams",
    "Tasks",
    "UpdateTaskParams",
    "on_task_backend",
    "task_tools",
    "until_stopped",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in the server's and the client's ``extensions``."""
TASK_TTL_SECONDS = 3600.0
"""How long a task is kept from its creation (``ttlMs``: 3600000)."""
POLL_INTERVAL_MS = 500
"""The polling interval suggested to clients (``pollIntervalMs``)."""
TASK_BACKENDS = frozenset({"process", "celery"})
"""The backends whose tools are called as tasks by default."""

RunCall = Callable[
    [RequestChannel, list[dict[str, Any]], asyncio.Event],
    Coroutine[Any, Any, types.CallToolResult],
]
"""``run(channel, relayed, stop)``: answers the call; returns once ``stop`` is honoured."""
CallTool = Callable[
    [Any, types.CallToolRequestParams],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]
"""``call(ctx, params)``: the server's ordinary ``tools/call`` handler."""
StartTask = Callable[
    [Any, types.CallToolRequestParams, RequestChannel, list[dict[str, Any]], asyncio.Event],
    Coroutine[Any, Any, types.CallToolResult],
]
"""``start(ctx, params, channel, relayed, stop)``: the call of a task (see :data:`RunCall`)."""


class TaskParams(types.RequestParams):
    """The params of ``tasks/get`` and ``tasks/cancel``: ``{"taskId": ...}``."""

    task_id: str


class UpdateTaskParams(TaskParams):
    """The params of ``tasks/update``: ``taskId`` and ``inputResponses`` (by question key)."""

    input_responses: types.InputResponses = Field(default_factory=dict)


def on_task_backend(tool: Tool) -> bool:
    """Whether ``tool`` runs on a backend of :data:`TASK_BACKENDS` (a layer of its stack)."""
    return any(layer.kind == "backend" and layer.name in TASK_BACKENDS for layer in tool.stack)


def task_tools(globs: Sequence[str] | None) -> Callable[[Tool], bool]:
    """Which tools run as tasks: those a glob matches (``fnmatchcase``); ``None``: the default.

    Args:
        globs: ``[serve] tasks`` (``[]``: no tool); ``None``: :func:`on_task_backend`.

    """
    if globs is None:
        return on_task_backend
    chosen = tuple(globs)
    return lambda tool: any(fnmatchcase(tool.name, glob) for glob in chosen)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def until_stopped(
    call: Coroutine[Any, Any, ToolResult], stop: asyncio.Event | None, tool: str
) -> ToolResult:
    """Await ``call``; once ``stop`` is set first, cancel it and answer a ``cancelled`` failure.

    The cancellation reaches the tool's backend as a cancelled caller does (the
    ``process`` backend kills the worker, ``celery`` revokes the task with
    ``terminate``) and is awaited before the failure is answered. A body that
    finishes anyway keeps its result.

    Returns:
        The call's result, or a failure ``kind="cancelled"``, ``where="runtime"``; with
        ``stop`` ``None``, the call's result.

    """
    if stop is None:
        return await call
    body = asyncio.ensure_future(call)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({body, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        body.cancel()
        raise
    finally:
        waiter.cancel()
    if not body.done():
        body.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({body})  # the backend's kill or revoke, done before the answer
    if body.done() and not body.cancelled():
        return body.result()
    failure = ToolFailure(
        kind=FailureKind.CANCELLED,
        message=f"tool {tool!r}: the task was cancelled (tasks/cancel) before the call finished",
        where=FailureWhere.RUNTIME,
    )
    return ToolResult.model_construct(
        schema_version=SCHEMA_VERSION, ok=False, value=None, failure=failure
    )


class TaskChannel(RoundsChannel):
    """The call channel of a task: questions wait for ``tasks/update``; no log, no progress."""

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Drop it: the tasks extension carries no ``notifications/message``."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Drop it: the tasks extension carries no ``notifications/progress``."""


@dataclass
class _Task:
    task_id: str
    principal: str | None
    created: str
    updated: str
    runner: asyncio.Task[types.CallToolResult]
    stop: asyncio.Event
    suspended: _Suspended[Any]
    channel: TaskChannel
    asked: set[str] = field(default_factory=set)
    cancelled: bool = False
    message: str | None = None


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MCPError):
        error: dict[str, Any] = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        return error
    return {"code": types.INTERNAL_ERROR, "message": "the task's call failed in the server"}


def _unknown(task_id: str) -> MCPError:
    return MCPError(
        code=types.INVALID_PARAMS,
        message=f"task {task_id!r}: no such task (unknown, expired, or another client's)",
    )


class Tasks:
    """The tasks of one server, by ``taskId`` (see the module).

    Args:
        principal_of: who a request acts for (``None``: nobody in particular); a task
            answers only requests of its creator's principal.
        tools: the served tools.
        takes: which of them are called as tasks (the others answer as ever).
        ttl: seconds a task is kept from its creation.
        poll_interval_ms: the ``pollIntervalMs`` suggested to clients.

    """

    def __init__(
        self,
        principal_of: Callable[[Any], str | None],
        tools: Iterable[Tool],
        takes: Callable[[Tool], bool],
        *,
        ttl: float = TASK_TTL_SECONDS,
        poll_interval_ms: int = POLL_INTERVAL_MS,
    ) -> None:
        self._principal_of = principal_of
        self.names = frozenset(tool.name for tool in tools if takes(tool))
        self._ttl = ttl
        self._poll = poll_interval_ms
        self._tasks: dict[str, _Task] = {}
        self._running: set[asyncio.Task[Any]] = set()

    @staticmethod
    def accepts(ctx: Any) -> bool:
        """Whether the request of ``ctx`` is 2026-07-28 and lists the tasks extension."""
        if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            return False
        wanted = types.ClientCapabilities(extensions={TASKS_EXTENSION: {}})
        return bool(ctx.session.check_client_capability(wanted))

    def takes(self, ctx: Any, name: str) -> bool:
        """Whether a ``tools/call`` of ``name`` on the request of ``ctx`` becomes a task."""
        return name in self.names and self.accepts(ctx)

    def install(self, server: Server[Any], call: CallTool, start: StartTask) -> None:
        """Serve ``tools/call``, ``tasks/get``, ``tasks/update`` and ``tasks/cancel``.

        A ``tools/call`` that :meth:`takes` becomes a task running ``start(ctx, params,
        channel, relayed, stop)``; any other is answered by ``call(ctx, params)``. The
        extension is announced in the server's capabilities (``server/discover``). With
        no tool called as a task, nothing is installed.
        """
        if not self.names:
            return

        async def call_or_task(
            ctx: Any, params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
            if not self.takes(ctx, params.name):
                return await call(ctx, params)

            def run(
                channel: RequestChannel, relayed: list[dict[str, Any]], stop: asyncio.Event
            ) -> Coroutine[Any, Any, types.CallToolResult]:
                return start(ctx, params, channel, relayed, stop)

            return await self.create(ctx, run)

        server.add_request_handler("tools/call", types.CallToolRequestParams, call_or_task)
        server.add_request_handler("tasks/get", TaskParams, self.get)
        server.add_request_handler("tasks/update", UpdateTaskParams, self.update)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel)
        server.extensions[TASKS_EXTENSION] = {}

    async def create(self, ctx: Any, run: RunCall) -> dict[str, Any]:
        """Start ``run`` as a task; the ``CreateTaskResult`` (wire form, ``resultType: "task"``).

        The task answers ``tasks/get`` before this returns (SEP-2663: durably created).
        """
        task_id = secrets.token_urlsafe(24)
        suspended: _Suspended[Any] = _Suspended()
        relayed: list[dict[str, Any]] = []
        channel = TaskChannel(ctx, LogLevels(), relayed, suspended)
        stop = asyncio.Event()
        runner = asyncio.create_task(run(channel, relayed, stop))
        now = _now()
        task = _Task(task_id, self._principal_of(ctx), now, now, runner, stop, suspended, channel)
        self._tasks[task_id] = task
        self._running.add(runner)
        runner.add_done_callback(lambda done: self._finished(task, done))
        asyncio.get_running_loop().call_later(self._ttl, self._expire, task_id)
        return {"resultType": "task", **self._state(task, detailed=False)}

    def _finished(self, task: _Task, runner: asyncio.Task[Any]) -> None:
        self._running.discard(runner)
        task.updated = _now()

    def _expire(self, task_id: str) -> None:
        task = self._tasks.pop(task_id, None)
        if task is not None and not task.runner.done():
            task.stop.set()  # the body is stopped and its outcome recorded, as for a cancel

    def _find(self, ctx: Any, params: TaskParams) -> _Task:
        if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        task = self._tasks.get(params.task_id)
        if task is None or task.principal != self._principal_of(ctx):
            raise _unknown(params.task_id)
        return task

    def _state(self, task: _Task, *, detailed: bool) -> dict[str, Any]:
        state: dict[str, Any] = {
            "taskId": task.task_id,
            "status": "working",
            "createdAt": task.created,
            "lastUpdatedAt": task.updated,
            "ttlMs": round(self._ttl * 1000),
            "pollIntervalMs": self._poll,
        }
        runner = task.runner
        if runner.done():
            state.update(self._outcome(task, runner))
        else:
            pending = {
                key: question.request
                for key, question in task.suspended.pending.items()
                if not question.answer.done()
            }
            if pending:
                if not pending.keys() <= task.asked:
                    task.asked |= pending.keys()
                    task.updated = state["lastUpdatedAt"] = _now()
                state["status"] = "input_required"
                if detailed:
                    state["inputRequests"] = {
                        key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                        for key, request in pending.items()
                    }
            elif task.cancelled:
                state["statusMessage"] = "cancelling: the body is being stopped"
        if not detailed:
            for key in ("result", "error", "inputRequests"):
                state.pop(key, None)
        return state

    def _outcome(self, task: _Task, runner: asyncio.Task[types.CallToolResult]) -> dict[str, Any]:
        if runner.cancelled():
            return {"status": "cancelled", "statusMessage": "the server stopped the task"}
        exc = runner.exception()
        if exc is None and task.channel.missing is not None:
            missing = task.channel.missing.model_dump(by_alias=True, mode="json", exclude_none=True)
            exc = MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="the client did not declare the capability this call's question needs",
                data={"requiredCapabilities": missing},
            )
        if exc is not None:
            return {"status": "failed", "error": _error(exc)}
        result = runner.result()
        failure = (result.meta or {}).get("toolproof/failure")
        if task.stop.is_set() and isinstance(failure, dict) and failure.get("kind") == "cancelled":
            return {"status": "cancelled", "statusMessage": str(failure.get("message", ""))}
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"status": "completed", "result": wire}

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        """``tasks/get``: the task's detailed state.

        Raises:
            MCPError: ``-32602`` naming an unknown, expired or another principal's task;
                ``-32601`` on a protocol revision before 2026-07-28.

        """
        return self._state(self._find(ctx, params), detailed=True)

    async def update(self, ctx: Any, params: UpdateTaskParams) -> dict[str, Any]:
        """``tasks/update``: deliver each answer to its pending question; an empty result.

        Raises:
            MCPError: as :meth:`get`.

        """
        task = self._find(ctx, params)
        delivered = False
        for key, question in list(task.suspended.pending.items()):
            response = params.input_responses.get(key)
            if response is not None and not question.answer.done():
                wire = response.model_dump(by_alias=True, mode="json", exclude_none=True)
                question.answer.set_result(wire)
                delivered = True
        if delivered:
            task.updated = _now()
        return {}

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        """``tasks/cancel``: stop the body (see :func:`until_stopped`); an empty result.

        Raises:
            MCPError: as :meth:`get`.

        """
        task = self._find(ctx, params)
        if not task.runner.done() and not task.cancelled:
            task.cancelled = True
            task.updated = _now()
            task.stop.set()
        return {}
