"""The worker's side of the Temporal backend: ``toolproof.run`` over one Toolset.

:func:`serve` connects to the Temporal frontend, builds the Toolset from the
composition root once (:class:`toolproof.backends.worker.WorkerServer`) and runs a
``temporalio`` worker on one task queue serving the :class:`CallWorkflow` workflow and
the ``toolproof.run`` activity. The activity answers protocol requests (the variant's
name and validated arguments) with the canonical JSON of a ``ToolResult``: a tool's
failure is a result, so Temporal retries only what failed outside the body (a lost
worker, a timeout), and only as the call's retry policy allows.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolproof.backends.temporal import ACTIVITY_NAME, CallWorkflow, TemporalSettings
from toolproof.backends.worker import WORKER_ENV, Builder, WorkerServer

__all__ = ["serve"]


async def serve(
    config_path: str | Path,
    settings: TemporalSettings,
    build: Builder,
    *,
    task_queue: str | None = None,
    concurrency: int = 2,
    ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``toolproof.run`` for the Toolset of ``config_path`` until cancelled.

    Args:
        config_path: the ``toolproof.toml`` callers built their Toolset from.
        settings: the ``[backends.temporal]`` settings (address, namespace, queue).
        build: builds the Toolset (``toolproof.config.build_toolset``).
        task_queue: the task queue to poll (default: ``settings.task_queue``).
        concurrency: activities run at once (each a tool call).
        ready: called once the worker polls (``toolproof worker`` prints then).

    Raises:
        ConfigError: the composition root is invalid.
        RuntimeError: the frontend cannot be reached (from ``temporalio``).

    """
    os.environ[WORKER_ENV] = "1"
    server = WorkerServer(Path(config_path).resolve(), build)
    await server.start()

    @activity.defn(name=ACTIVITY_NAME)
    async def run(request: str) -> str:
        """Answer one relocation request with the canonical JSON of a ``ToolResult``.

        It heartbeats while the body runs (every third of the heartbeat timeout), so
        the server learns of a dead worker within that timeout and a cancel reaches
        the body.
        """
        limit = activity.info().heartbeat_timeout
        beat = limit.total_seconds() / 3 if limit else 1.0
        answer = asyncio.ensure_future(server.handle(request))
        try:
            while True:
                done, _ = await asyncio.wait({answer}, timeout=beat)
                if done:
                    return answer.result().decode()
                activity.heartbeat()
        finally:
            answer.cancel()

    try:
        client = await asyncio.wait_for(
            Client.connect(settings.target(), namespace=settings.namespace),
            settings.connect_timeout,
        )
        restrictions = SandboxRestrictions.default.with_passthrough_modules("toolproof")
        worker = Worker(
            client,
            task_queue=task_queue or settings.task_queue,
            workflows=[CallWorkflow],
            activities=[run],
            max_concurrent_activities=concurrency,
            workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        )
        async with worker:
            if ready is not None:
                ready()
            await asyncio.Event().wait()
    finally:
        await server.aclose()
