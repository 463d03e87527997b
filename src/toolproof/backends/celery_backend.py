"""``CeleryBackend``: the caller's side of the Celery backend.

One call is one ``toolproof.run`` task: publish, then wait for its result with a
bound. Per-call delivery options are reserved parameters of the variant
(:data:`CALL_OPTIONS`): they appear in its input schema, are validated with the
arguments, and are removed before the request is built, so they never reach the
body. Engine errors are translated here, at the boundary, into normalized
failures (see :func:`failure_for`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import kombu.exceptions
import redis.exceptions
from celery import exceptions as celery_exceptions
from celery.result import AsyncResult

from toolproof.backends.celery import TASK_NAME, CelerySettings, describe, make_app
from toolproof.backends.protocol import ProtocolError, decode_result, encode_request
from toolproof.contract.tools import ToolResult

__all__ = ["CALL_OPTIONS", "CeleryBackend", "failure_for"]

CALL_OPTIONS: dict[str, dict[str, Any]] = {
    "queue": {
        "type": "string",
        "pattern": r"^[A-Za-z0-9_.:-]{1,200}$",
        "description": "Celery queue for this call (default: the backend's queue).",
    },
    "countdown": {
        "type": "number",
        "minimum": 0,
        "maximum": 86400,
        "description": "Seconds before a worker may start this call.",
    },
    "priority": {
        "type": "integer",
        "minimum": 0,
        "maximum": 9,
        "description": "Celery message priority, 0 to 9.",
    },
    "expires": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 604800,
        "description": "Seconds after which a call no worker has started is discarded.",
    },
}
"""The per-call options a Celery variant adds to its input schema: name -> JSON Schema."""

_UNAVAILABLE = (
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)


def failure_for(task_id: str, state: str, error: BaseException | None) -> ToolResult:
    """Translate a finished task that did not succeed into a normalized failure.

    Args:
        task_id: the Celery task id (named in the message and in ``detail``).
        state: the task state (``FAILURE``, ``REVOKED``...).
        error: the exception Celery rebuilt from the result backend, if any.

    Returns:
        ``kind="worker"`` for a lost worker process, ``"timeout"`` for a time limit,
        ``"cancelled"`` for a revoked or expired task, ``"backend"`` otherwise.

    """
    name = type(error).__name__ if error is not None else state
    text = f"{name}: {error}" if error is not None else state
    detail: dict[str, Any] = {"task_id": task_id, "state": state, "exception": name}
    if isinstance(error, celery_exceptions.WorkerLostError):
        return ToolResult.fail(
            "worker",
            f"celery task {task_id}: the worker process running it was lost ({text})",
            where="worker",
            retryable=True,
            detail=detail,
        )
    if isinstance(
        error, celery_exceptions.TimeLimitExceeded | celery_exceptions.SoftTimeLimitExceeded
    ):
        return ToolResult.fail(
            "timeout",
            f"celery task {task_id}: the worker stopped it at its time limit ({text})",
            where="worker",
            retryable=True,
            detail=detail,
        )
    if state == "REVOKED" or isinstance(error, celery_exceptions.TaskRevokedError):
        return ToolResult.fail(
            "cancelled",
            f"celery task {task_id} was revoked or expired before it finished ({text})",
            where="backend",
            retryable=True,
            detail=detail,
        )
    return ToolResult.fail(
        "backend",
        f"celery task {task_id} failed on the worker outside the tool body ({text})",
        where="worker",
        detail=detail,
    )


class CeleryBackend:
    """Submits relocation requests as Celery tasks and waits for their results.

    Args:
        settings: broker, result backend, queue and timeouts.
        timeout: seconds a call may take from publishing to result (plus its
            ``countdown``); then the task is revoked and the call fails with
            ``kind="timeout"``.
        max_in_flight: calls waiting at once (each holds a thread while it waits).

    """

    def __init__(
        self, settings: CelerySettings, *, timeout: float = 300.0, max_in_flight: int = 64
    ) -> None:
        self.settings = settings
        self.timeout = timeout
        self.app = make_app(settings)
        self._time_limit = math.ceil(timeout) + 1
        self._reset_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_in_flight, thread_name_prefix="toolproof-celery")

    async def submit(
        self, variant: str, arguments: dict[str, Any], descriptor: str, options: dict[str, Any]
    ) -> ToolResult:
        """Run ``variant`` on a Celery worker; return its result or a normalized failure.

        Args:
            variant: the tool name the worker runs.
            arguments: validated arguments, without the call options.
            descriptor: the caller's descriptor digest of ``variant``.
            options: the call options given (a subset of :data:`CALL_OPTIONS`).

        Raises:
            asyncio.CancelledError: the caller was cancelled; the task was revoked.

        """
        request = encode_request(variant, arguments, descriptor).decode()
        sent: dict[str, str] = {}
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._executor, self._round_trip, request, options, sent)
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            task_id = sent.get("id")
            if task_id is not None:
                await loop.run_in_executor(self._executor, self._revoke, task_id, True)
            raise

    def _reset(self) -> None:
        with self._reset_lock:
            stale, self.app = self.app, make_app(self.settings)
        stale.close()

    def _revoke(self, task_id: str, terminate: bool = False) -> None:
        """Revoke a task: a worker that has not started it drops it.

        ``terminate`` also kills the pool process running it (a cancelled caller). A
        timed-out task is not terminated: its hard time limit (``timeout`` + 1 s)
        stops the body through the pool's own bookkeeping, and holds even when the
        revoke message is lost with the broker.
        """
        with contextlib.suppress(*_UNAVAILABLE):
            if terminate:
                self.app.control.revoke(task_id, terminate=True, signal="SIGKILL")
            else:
                self.app.control.revoke(task_id)

    def _publish(self, request: str, options: dict[str, Any]) -> AsyncResult:
        queue = options.get("queue") or self.settings.queue
        return self.app.send_task(
            TASK_NAME,
            args=[request],
            queue=queue,
            countdown=options.get("countdown"),
            priority=options.get("priority"),
            expires=options.get("expires"),
            time_limit=self._time_limit,
            retry=False,
        )

    def _round_trip(
        self, request: str, options: dict[str, Any], sent: dict[str, str]
    ) -> ToolResult:
        broker = describe(self.settings.broker_url())
        try:
            result = self._publish(request, options)
        except (*_UNAVAILABLE, RuntimeError) as exc:
            if isinstance(exc, RuntimeError):
                # Celery's result consumer gave up reconnecting: it needs a new app.
                if not isinstance(exc.__cause__, _UNAVAILABLE):
                    raise
                self._reset()
                exc = exc.__cause__
            return ToolResult.fail(
                "unavailable",
                f"celery broker {broker} is unreachable: {type(exc).__name__}: {exc} "
                f"(connect timeout {self.settings.connect_timeout} s)",
                where="backend",
                retryable=True,
                detail={"broker": broker, "exception": type(exc).__name__},
            )
        task_id = result.id
        sent["id"] = task_id
        wait = self.timeout + float(options.get("countdown") or 0)
        try:
            value = result.get(timeout=wait, propagate=False, disable_sync_subtasks=False)
            state = result.state
        except celery_exceptions.TimeoutError:
            self._revoke(task_id)
            return ToolResult.fail(
                "timeout",
                f"celery task {task_id} gave no result within {wait} s; it was revoked "
                f"and its time limit stops the body at {self._time_limit} s",
                where="backend",
                retryable=True,
                detail={"task_id": task_id, "timeout_s": wait},
            )
        except _UNAVAILABLE as exc:
            store = describe(self.settings.result_url())
            return ToolResult.fail(
                "unavailable",
                f"celery result backend {store} failed while waiting for task {task_id}: "
                f"{type(exc).__name__}: {exc}",
                where="backend",
                retryable=True,
                detail={"task_id": task_id, "exception": type(exc).__name__},
            )
        if state != "SUCCESS":
            return failure_for(task_id, state, value if isinstance(value, BaseException) else None)
        try:
            return decode_result(value)
        except ProtocolError as exc:
            return ToolResult.fail(
                "backend", f"celery task {task_id}: {exc.message}", where="worker"
            )

    def close(self) -> None:
        """Stop waiting threads from taking new calls and release broker connections."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.app.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
