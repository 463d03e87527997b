"""``TemporalBackend``: the caller's side of the Temporal backend.

One call is one ``toolproof.call`` workflow execution running one ``toolproof.run``
activity (:mod:`toolproof.backends.temporal`). The workflow id and the activity id are
the call's idempotency key when it has one; the retry policy follows the tool's
declaration (``BackendRequest.retry_safe``). Engine errors are translated here, at the
boundary, into normalized failures: a timeout is ``kind="timeout"``, a cancel
``"cancelled"``, an unreachable frontend ``"unavailable"``, anything else that failed
outside the body ``"backend"``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any, Self

from temporalio import exceptions as temporal_exceptions
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from toolproof.backends.failures import rule_for
from toolproof.backends.protocol import (
    BackendRequest,
    ProtocolError,
    decode_result,
    encode_request,
)
from toolproof.backends.temporal import WORKFLOW_NAME, TemporalSettings, schedule_to_close
from toolproof.contract.tools import ToolResult
from toolproof.failures import FailureKind
from toolproof.tools.idempotency import current_idempotency_key

__all__ = ["TemporalBackend", "failure_for"]


def _root_cause(error: BaseException) -> BaseException:
    """The innermost Temporal failure of ``error`` (workflow -> activity -> its cause)."""
    current = error
    while True:
        cause = getattr(current, "cause", None)
        if not isinstance(cause, BaseException):
            return current
        current = cause


def failure_for(workflow_id: str, error: BaseException) -> ToolResult:
    """Translate a workflow that did not complete into a normalized failure.

    The kind comes from :func:`toolproof.backends.failures.rule_for` (the one table)
    applied to the innermost Temporal failure (workflow -> activity -> its cause).

    Args:
        workflow_id: the workflow (and activity) id, named in the message and ``detail``.
        error: what ``WorkflowHandle.result()`` raised (``WorkflowFailureError``).

    Returns:
        ``kind="timeout"`` when the activity timed out (``detail.timeout_type`` is
        Temporal's), ``"cancelled"`` when it was cancelled or terminated, ``"backend"``
        (``where="worker"``) otherwise.

    """
    cause = _root_cause(error)
    name = type(cause).__name__
    detail: dict[str, Any] = {"workflow_id": workflow_id, "exception": name}
    rule = rule_for(cause) or rule_for(error)
    if rule is None or rule.kind not in ("timeout", "cancelled"):
        return ToolResult.fail(
            "backend",
            f"temporal activity {workflow_id} failed on the worker outside the tool body "
            f"({name}: {cause})",
            where="worker",
            detail=detail,
        )
    if isinstance(cause, temporal_exceptions.TimeoutError):
        detail["timeout_type"] = cause.type.name if cause.type is not None else None
    return ToolResult.fail(
        rule.kind,
        f"temporal activity {workflow_id} {rule.meaning} ({name}: {cause})",
        where=rule.where,
        retryable=rule.retryable,
        detail=detail,
    )


class TemporalBackend:
    """Runs relocation requests as Temporal activities and waits for their results.

    Args:
        settings: frontend address, namespace, task queue and timeouts.
        timeout: seconds a call may take when its request names none (each attempt and
            all attempts together); over it the call fails with ``kind="timeout"``.
        max_attempts: Temporal's ``maximum_attempts`` for a retry-safe call (a
            read-only, idempotent or keyed tool); every other call gets 1.
        task_queue: the task queue (default: ``settings.task_queue``).

    """

    def __init__(
        self,
        settings: TemporalSettings,
        *,
        timeout: float = 300.0,
        max_attempts: int = 3,
        task_queue: str | None = None,
    ) -> None:
        self.settings = settings
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.task_queue = task_queue or settings.task_queue
        self._client: Client | None = None
        self._lock = asyncio.Lock()

    async def client(self) -> Client:
        """The connected client (connected once, at the first call).

        Raises:
            RuntimeError, TimeoutError: the frontend did not answer within
                ``connect_timeout`` seconds.

        """
        async with self._lock:
            if self._client is None:
                self._client = await asyncio.wait_for(
                    Client.connect(self.settings.target(), namespace=self.settings.namespace),
                    self.settings.connect_timeout,
                )
            return self._client

    def _unavailable(self, exc: BaseException) -> ToolResult:
        target = self.settings.target()
        name = type(exc).__name__
        rule = rule_for(exc)
        kind = FailureKind.UNAVAILABLE if rule is None else rule.kind
        return ToolResult.fail(
            kind,
            f"temporal frontend {target} is unreachable: {name}: {exc} "
            f"(connect timeout {self.settings.connect_timeout} s)",
            where="backend",
            retryable=True,
            detail={"address": target, "exception": name},
        )

    async def submit(self, request: BackendRequest) -> ToolResult:
        """Run ``request.variant`` as a Temporal activity; return its result or a failure.

        Args:
            request: the variant, validated arguments and descriptor digest;
                ``request.timeout`` (seconds, default: the backend's) is each attempt's
                start-to-close timeout; ``request.retry_safe`` picks the retry policy
                (``max_attempts``, else 1).

        Returns:
            The tool's result; a timeout (the activity's, or no answer within its
            bound + ``grace``, after which the workflow is terminated) is
            ``kind="timeout"``; an unreachable frontend ``"unavailable"``.

        Raises:
            asyncio.CancelledError: the caller was cancelled; the workflow was
                cancelled too.

        """
        key = request.idempotency_key or current_idempotency_key() or ""
        wire = encode_request(
            request.variant, request.arguments, request.descriptor, idempotency_key=key
        ).decode()
        timeout = self.timeout if request.timeout is None else request.timeout
        attempts = self.max_attempts if request.retry_safe else 1
        workflow_id = key or f"toolproof-{uuid.uuid4()}"
        bound = schedule_to_close(timeout, attempts) or timeout
        try:
            client = await self.client()
        except (RuntimeError, TimeoutError, RPCError) as exc:
            return self._unavailable(exc)
        try:
            handle: WorkflowHandle[Any, Any] = await client.start_workflow(
                WORKFLOW_NAME,
                args=[wire, workflow_id, attempts, timeout, self.settings.heartbeat],
                id=workflow_id,
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                execution_timeout=timedelta(seconds=bound + self.settings.grace),
                result_type=str,
            )
        except temporal_exceptions.WorkflowAlreadyStartedError:
            # The key already completed: read that execution's result, never act again.
            handle = client.get_workflow_handle(workflow_id, result_type=str)
        except RPCError as exc:
            return self._unavailable(exc)
        return await self._wait(handle, workflow_id, bound)

    async def _wait(
        self, handle: WorkflowHandle[Any, Any], workflow_id: str, timeout: float
    ) -> ToolResult:
        try:
            value = await asyncio.wait_for(handle.result(), timeout + self.settings.grace)
        except TimeoutError:
            await asyncio.shield(self._terminate(handle, "the caller's wait ended"))
            return ToolResult.fail(
                "timeout",
                f"temporal activity {workflow_id} gave no result within "
                f"{timeout + self.settings.grace} s; its workflow was terminated",
                where="backend",
                retryable=True,
                detail={"workflow_id": workflow_id, "timeout_s": timeout},
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel(handle))
            raise
        except WorkflowFailureError as exc:
            return failure_for(workflow_id, exc)
        except RPCError as exc:
            return self._unavailable(exc)
        try:
            return decode_result(value)
        except ProtocolError as exc:
            return ToolResult.fail(
                "backend", f"temporal activity {workflow_id}: {exc.message}", where="worker"
            )

    @staticmethod
    async def _cancel(handle: WorkflowHandle[Any, Any]) -> None:
        try:
            await handle.cancel()
        except RPCError:
            return

    @staticmethod
    async def _terminate(handle: WorkflowHandle[Any, Any], reason: str) -> None:
        try:
            await handle.terminate(reason=reason)
        except RPCError:
            return

    async def aclose(self) -> None:
        """Drop the client (its connection closes with it); idempotent."""
        self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
