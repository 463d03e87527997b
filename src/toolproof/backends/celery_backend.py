"""``CeleryBackend``: the caller's side of the Celery backend.

One call is one ``toolproof.run`` task: publish, then wait for its result with a
bound. Per-call delivery options are reserved parameters of the variant
(:data:`toolproof.backends.builtin.CALL_OPTIONS`): they appear in its input
schema, are validated with the arguments, and travel in ``BackendRequest.options``,
so they never reach the body. Engine errors are translated here, at the boundary, into normalized
failures (see :func:`failure_for`).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import redis
from celery import exceptions as celery_exceptions
from celery.result import AsyncResult

from toolproof.backends.celery import (
    TASK_NAME,
    CelerySettings,
    close_app,
    describe,
    make_app,
    revoked_key,
)
from toolproof.backends.failures import ENGINE_FAILURES, qualified_name, rule_for
from toolproof.backends.protocol import (
    BackendRequest,
    ProtocolError,
    decode_result,
    encode_request,
)
from toolproof.contract.tools import ToolResult
from toolproof.failures import FailureKind

__all__ = ["CeleryBackend", "failure_for", "from_result_backend"]


def _time_limit(timeout: float) -> int:
    """The task's hard time limit (seconds): the caller's timeout, rounded up, plus 1 s."""
    return math.ceil(timeout) + 1


def _engine_errors(error: BaseException) -> bool:
    rule = rule_for(error)
    return rule is not None and rule.kind == "unavailable"


def from_result_backend(error: BaseException) -> bool:
    """Whether ``error`` (or what it chains) was raised talking to the result backend.

    Celery raises the same exception classes for the broker and the result store
    (both may be Redis, and kombu re-raises either as ``OperationalError``), so the
    endpoint is read from where it was raised: a frame in ``celery.backends``.
    """
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            if str(tb.tb_frame.f_globals.get("__name__", "")).startswith("celery.backends"):
                return True
            tb = tb.tb_next
        stack += [current.__cause__, current.__context__]
    return False


def failure_for(task_id: str, state: str, error: BaseException | None) -> ToolResult:
    """Translate a finished task that did not succeed into a normalized failure.

    The kind comes from :func:`toolproof.backends.failures.rule_for` (the one table).

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
    rule = rule_for(error) if error is not None else None
    if rule is None and state == "REVOKED":
        rule = ENGINE_FAILURES[qualified_name(celery_exceptions.TaskRevokedError)]
    kind = rule.kind if rule is not None else FailureKind.BACKEND
    if kind == "worker":
        message = f"celery task {task_id}: the worker process running it was lost ({text})"
    elif kind == "timeout":
        message = f"celery task {task_id}: the worker stopped it at its time limit ({text})"
    elif kind == "cancelled":
        message = f"celery task {task_id} was revoked or expired before it finished ({text})"
    else:
        message = f"celery task {task_id} failed on the worker outside the tool body ({text})"
        return ToolResult.fail("backend", message, where="worker", detail=detail)
    assert rule is not None
    return ToolResult.fail(kind, message, where=rule.where, retryable=rule.retryable, detail=detail)


class CeleryBackend:
    """Submits relocation requests as Celery tasks and waits for their results (a ``Backend``).

    Args:
        settings: broker, result backend, queue and timeouts.
        timeout: seconds a call may take from publishing to result (plus its
            ``countdown``) when its request names none; then the task is revoked and
            the call fails with ``kind="timeout"``.
        max_in_flight: calls waiting at once (each holds a thread while it waits).

    """

    def __init__(
        self, settings: CelerySettings, *, timeout: float = 300.0, max_in_flight: int = 64
    ) -> None:
        self.settings = settings
        self.timeout = timeout
        self.app = make_app(settings)
        self._reset_lock = threading.Lock()
        self._mark_client: redis.Redis | None = None
        self._executor = ThreadPoolExecutor(max_in_flight, thread_name_prefix="toolproof-celery")

    async def submit(self, request: BackendRequest) -> ToolResult:
        """Run ``request.variant`` on a Celery worker; return its result or a normalized failure.

        Args:
            request: the variant, validated arguments (without the call options) and
                descriptor digest; ``request.timeout`` (seconds, default: the
                backend's) bounds the wait and sets the task's hard time limit
                (``timeout`` + 1 s); ``request.options`` are the call options given
                (a subset of :data:`toolproof.backends.builtin.CALL_OPTIONS`).

        Raises:
            asyncio.CancelledError: the caller was cancelled; the task was revoked.

        """
        wire = encode_request(request.variant, request.arguments, request.descriptor).decode()
        timeout = self.timeout if request.timeout is None else request.timeout
        sent: dict[str, str] = {}
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(
            self._executor, self._round_trip, wire, request.options, timeout, sent
        )
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            task_id = sent.get("id")
            if task_id is not None:
                await loop.run_in_executor(self._executor, self._revoke, task_id, True)
            raise

    def _distinct_store(self) -> bool:
        """Whether the result backend is another endpoint than the broker."""
        return self.settings.result_url() != self.settings.broker_url()

    def _marks(self) -> redis.Redis | None:
        """The client that writes revoke marks to a Redis result backend (made once)."""
        url = self.settings.result_url()
        if not url.startswith(("redis://", "rediss://")):
            return None
        with self._reset_lock:
            if self._mark_client is None:
                timeout = self.settings.connect_timeout
                self._mark_client = redis.Redis.from_url(
                    url, socket_connect_timeout=timeout, socket_timeout=timeout
                )
            return self._mark_client

    def _reset(self) -> None:
        with self._reset_lock:
            stale, self.app = self.app, make_app(self.settings)
        close_app(stale)

    def _revoke(self, task_id: str, terminate: bool = False) -> None:
        """Give up on a task: no worker starts it later, and a running one is stopped.

        Three layers, each enough on its own for the case it covers: the task's
        ``expires`` (the caller's deadline, sent with the task) makes any worker that
        receives it later discard it; a revoke mark in the result backend
        (:func:`revoked_key`) makes any worker, even one started later, refuse it
        before the body runs; the broadcast revoke reaches the workers online now.
        ``terminate`` (a cancelled caller) also kills the pool process running it. A
        timed-out task is not terminated: its hard time limit (``timeout`` + 1 s)
        stops the body through the pool's own bookkeeping, and holds even when the
        revoke message is lost with the broker.
        """
        try:
            client = self._marks()
            if client is not None:
                client.set(revoked_key(task_id), "1", ex=math.ceil(self.settings.result_expires))
        except Exception as exc:  # the store is down: expires and the broadcast remain
            if rule_for(exc) is None:
                raise
        try:
            if terminate:
                self.app.control.revoke(task_id, terminate=True, signal="SIGKILL")
            else:
                self.app.control.revoke(task_id)
        except Exception as exc:
            if rule_for(exc) is None:
                raise

    def _publish(self, request: str, options: Mapping[str, Any], timeout: float) -> AsyncResult:
        queue = options.get("queue") or self.settings.queue
        countdown = float(options.get("countdown") or 0)
        deadline = timeout + countdown  # the caller stops waiting then
        asked = options.get("expires")
        expires = deadline if asked is None else min(float(asked), deadline)
        return self.app.send_task(
            TASK_NAME,
            args=[request],
            queue=queue,
            countdown=options.get("countdown"),
            priority=options.get("priority"),
            expires=expires,
            time_limit=_time_limit(timeout),
            retry=False,
        )

    def _unavailable(self, exc: BaseException, *, store: bool, task_id: str | None) -> ToolResult:
        """The ``unavailable`` failure naming the endpoint that failed (broker or store)."""
        rule = rule_for(exc)
        assert rule is not None
        name = type(exc).__name__
        if store:
            url = describe(self.settings.result_url())
            if task_id is None:
                message = (
                    f"celery result backend {url} is unreachable: {name}: {exc} "
                    f"(connect timeout {self.settings.connect_timeout} s)"
                )
            else:
                message = (
                    f"celery result backend {url} failed while waiting for task {task_id}: "
                    f"{name}: {exc}"
                )
            detail: dict[str, Any] = {"result_backend": url, "exception": name}
        else:
            url = describe(self.settings.broker_url())
            message = (
                f"celery broker {url} is unreachable: {name}: {exc} "
                f"(connect timeout {self.settings.connect_timeout} s)"
            )
            detail = {"broker": url, "exception": name}
        if task_id is not None:
            detail["task_id"] = task_id
        return ToolResult.fail(
            rule.kind, message, where=rule.where, retryable=rule.retryable, detail=detail
        )

    def _round_trip(
        self, request: str, options: Mapping[str, Any], timeout: float, sent: dict[str, str]
    ) -> ToolResult:
        try:
            result = self._publish(request, options, timeout)
        except Exception as exc:
            error: BaseException = exc
            # Both may be one Redis: then it is named as the broker (it is both).
            store = from_result_backend(exc) and self._distinct_store()
            if isinstance(exc, RuntimeError):
                # Celery's result consumer gave up reconnecting: it needs a new app.
                cause = exc.__cause__
                if cause is None or not _engine_errors(cause):
                    raise
                self._reset()
                error, store = cause, self._distinct_store()
            if not _engine_errors(error):
                raise
            return self._unavailable(error, store=store, task_id=None)
        task_id = result.id
        sent["id"] = task_id
        wait = timeout + float(options.get("countdown") or 0)
        try:
            value = result.get(timeout=wait, propagate=False, disable_sync_subtasks=False)
            state = result.state
        except celery_exceptions.TimeoutError:
            self._revoke(task_id)
            return ToolResult.fail(
                "timeout",
                f"celery task {task_id} gave no result within {wait} s; it will not run "
                f"later (it expired at that deadline and was revoked), and a body already "
                f"running is stopped by its time limit at {_time_limit(timeout)} s",
                where="backend",
                retryable=True,
                detail={"task_id": task_id, "timeout_s": wait},
            )
        except Exception as exc:
            if not _engine_errors(exc):
                raise
            return self._unavailable(exc, store=True, task_id=task_id)
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
        close_app(self.app)
        if self._mark_client is not None:
            self._mark_client.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaitable (the ``Backend`` protocol's form)."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
