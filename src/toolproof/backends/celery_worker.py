"""The worker's side of the Celery backend: the ``toolproof.run`` task over a Toolset.

:func:`worker_app` returns a Celery app with the task registered; each pool process
builds the Toolset from the composition root once (when the process starts, so the
first task does not pay for it) and answers requests with
:class:`toolproof.backends.worker.LoopThread`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from celery import Celery, signals

from toolproof.backends.celery import TASK_NAME, CelerySettings, make_app
from toolproof.backends.worker import WORKER_ENV, Builder, LoopThread

__all__ = ["worker_app"]

_RUNTIMES: dict[tuple[int, str], LoopThread] = {}
_LOCK = threading.Lock()


def _runtime(config_path: str, build: Builder) -> LoopThread:
    """The Toolset runtime of this process (built once per process, after any fork)."""
    key = (os.getpid(), config_path)
    with _LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            runtime = LoopThread(config_path, build)
            _RUNTIMES[key] = runtime
        return runtime


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
    app = make_app(settings, worker=True)

    def run(request: str) -> str:
        """Answer one relocation request with the canonical JSON of a ToolResult."""
        return _runtime(path, build).handle(request).decode()

    app.task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=False)(run)

    def warm(**_: Any) -> None:
        _runtime(path, build)

    signals.worker_process_init.connect(warm, weak=False)
    return app
