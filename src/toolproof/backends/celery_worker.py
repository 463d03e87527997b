"""The worker's side of the Celery backend: the ``toolproof.run`` task over a Toolset.

:func:`worker_app` returns a Celery app with the task registered; each pool process
builds the Toolset from the composition root at its first task and answers requests
with :class:`toolproof.backends.worker.SyncWorkerServer`. ``toolproof worker`` builds the
Toolset once in the main process before the pool forks, so the tool modules are
already imported and a pool process's build is quick. (Building in
``worker_process_init`` instead would keep inherited pipe ends open in a new pool
process for the length of the build, which hides the death of a sibling pool
process from the main process for that long.)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from celery import Celery, Task
from celery.signals import worker_process_shutdown

from toolproof.backends.celery import TASK_NAME, CelerySettings, make_app, revoked_key
from toolproof.backends.worker import WORKER_ENV, Builder, SyncWorkerServer
from toolproof.contract.tools import ToolResult
from toolproof.tools import hooks

__all__ = ["worker_app"]

_SERVERS: dict[tuple[int, int, str], SyncWorkerServer] = {}
_LOCK = threading.Lock()


def _server(config_path: str, build: Builder) -> SyncWorkerServer:
    """The worker server of this process and thread (built once, after any fork)."""
    key = (os.getpid(), threading.get_ident(), config_path)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = SyncWorkerServer(config_path, build)
            _SERVERS[key] = server
        return server


def _flush_spans(**_: object) -> None:
    """A pool process is ending: export its buffered spans (nothing with telemetry off)."""
    hooks.flush(2.0)


def worker_app(config_path: str | Path, settings: CelerySettings, build: Builder) -> Celery:
    """A Celery app serving ``toolproof.run`` for the Toolset of ``config_path``.

    Args:
        config_path: the ``toolproof.toml`` callers built their Toolset from.
        settings: the ``[backends.celery]`` settings (broker, result backend, queue).
        build: builds the Toolset from ``config_path`` (``toolproof.config.build_toolset``).

    Returns:
        The app; start it with ``app.worker_main([...])`` or ``toolproof worker``.

    """
    path = str(Path(config_path).resolve())
    os.environ[WORKER_ENV] = "1"
    worker_process_shutdown.connect(_flush_spans, weak=False, dispatch_uid="toolproof-spans")
    app = make_app(settings, worker=True)

    def run(task: Task, request: str) -> str:
        """Answer one relocation request with the canonical JSON of a ToolResult.

        A task its caller gave up on (a revoke mark in the result backend, which a
        worker started after the revoke still sees) is refused before the body runs.
        """
        task_id = task.request.id
        client = getattr(app.backend, "client", None)
        if task_id and client is not None and client.exists(revoked_key(task_id)):
            refused = ToolResult.fail(
                "cancelled",
                f"celery task {task_id} was given up by its caller (timeout or cancel) "
                "before a worker started it; it was not run",
                where="worker",
                detail={"task_id": task_id},
            )
            return refused.canonical().decode()
        return _server(path, build).handle(request).decode()

    app.task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=False)(run)

    return app
