"""The Celery backend: relocation requests as Celery tasks, for more than one machine.

Needs the ``celery`` extra (:func:`toolproof.version.install_hint`). This module imports
Celery; nothing in ``toolproof/__init__`` imports it.

The caller sends one task, ``toolproof.run``, whose single argument is the
protocol request (the canonical JSON text of variant name, arguments and descriptor
digest, see :mod:`toolproof.backends.protocol`) and whose result is the canonical
JSON text of a ``ToolResult``. Task messages and results use Celery's ``json``
serializer only; a worker accepts no other content type, so nothing is unpickled.

Workers are started with ``toolproof worker --config FILE`` (see
:mod:`toolproof.adapters.cli.worker`); each pool process builds the Toolset from
that file once. Delivery settings make failures visible instead of silent:

* ``task_acks_late``: a message is acknowledged after the task ran, so a worker
  that vanishes (the whole node) leaves it in the broker, redelivered after
  ``visibility_timeout`` seconds (Redis) to another worker;
* ``task_reject_on_worker_lost = False``: a pool process killed mid-task (the OOM
  killer, ``SIGKILL``) makes the task fail with ``WorkerLostError`` at once, which
  the caller reports as ``kind="worker"`` (redelivering would re-run a body that
  may have had effects);
* every wait of the caller is bounded by the variant's ``timeout``, after which the
  task is revoked and the call fails with ``kind="timeout"`` naming the task id;
  the task carries a hard ``time_limit`` (``timeout`` + 1 s), so the worker kills
  a body still running then; a cancelled caller revokes with ``terminate``;
* publishing never retries: an unreachable broker fails the call within
  ``connect_timeout`` seconds with ``kind="unavailable"``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field

from toolproof.contract.bounds import Seconds

__all__ = [
    "DEFAULT_BROKER",
    "DEFAULT_QUEUE",
    "ENV_BROKER",
    "ENV_RESULT_BACKEND",
    "TASK_NAME",
    "CelerySettings",
    "close_app",
    "close_result_backend",
    "make_app",
    "revoked_key",
    "settings_from",
]

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
"""The broker (and result backend) used when neither the config nor the environment names one."""

ENV_BROKER = "TOOLPROOF_CELERY_BROKER"
"""Environment variable naming the broker URL (used when ``[backends.celery] broker`` is unset)."""

ENV_RESULT_BACKEND = "TOOLPROOF_CELERY_RESULT_BACKEND"
"""Environment variable naming the result backend URL (default: the broker URL)."""

DEFAULT_QUEUE = "toolproof"
"""The queue tasks go to and workers listen on unless told otherwise."""

TASK_NAME = "toolproof.run"
"""The one task a toolproof worker serves: ``toolproof.run(request: str) -> str``."""


class CelerySettings(BaseModel):
    """The ``[backends.celery]`` table of ``toolproof.toml``.

    Attributes:
        broker: the broker URL (``redis://host:6379/0``, ``amqp://user:pw@host//``);
            default: ``$TOOLPROOF_CELERY_BROKER``, else :data:`DEFAULT_BROKER`.
        result_backend: where results are stored; default:
            ``$TOOLPROOF_CELERY_RESULT_BACKEND``, else a Redis broker URL itself.
        queue: the default queue (``--queue`` of the worker, ``queue`` of a call).
        connect_timeout: seconds to wait for the broker and result store to accept a
            connection before the call fails with ``kind="unavailable"``.
        visibility_timeout: seconds after which Redis redelivers a task whose worker
            vanished without acknowledging it (must exceed the longest task).
        result_expires: seconds results are kept in the result backend.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    broker: str | None = None
    result_backend: str | None = None
    queue: str = Field(default=DEFAULT_QUEUE, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")
    connect_timeout: float = Field(default=5.0, gt=0, le=300)
    visibility_timeout: Seconds = 3600.0
    result_expires: Seconds = 3600.0

    def broker_url(self) -> str:
        """The broker URL after the environment fallbacks."""
        return self.broker or os.environ.get(ENV_BROKER) or DEFAULT_BROKER

    def result_url(self) -> str:
        """The result backend URL after the environment fallbacks."""
        if self.result_backend:
            return self.result_backend
        env = os.environ.get(ENV_RESULT_BACKEND)
        if env:
            return env
        broker = self.broker_url()
        if broker.startswith(("redis://", "rediss://")):
            return broker
        return DEFAULT_BROKER


def revoked_key(task_id: str) -> str:
    """The result-backend key marking task ``task_id`` as given up by its caller.

    The caller sets it on a timeout or a cancel; every worker, including one started
    later, checks it before it runs the body.
    """
    return f"toolproof-revoked-{task_id}"


def settings_from(backends: Mapping[str, Any] | None) -> CelerySettings:
    """Validate the ``[backends.celery]`` table of a config's ``backends`` section.

    Raises:
        pydantic.ValidationError: an unknown key or a bad value.

    """
    table = (backends or {}).get("celery") or {}
    return CelerySettings.model_validate(dict(table))


def _redacted(url: str) -> str:
    """``redis://:secret@host`` -> ``redis://:***@host``: never print a password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def make_app(settings: CelerySettings, *, worker: bool = False) -> Celery:
    """A Celery app configured for toolproof tasks (JSON only, late acks, bounded waits).

    Args:
        settings: the ``[backends.celery]`` settings.
        worker: True for a worker's app, which reconnects to a broker that went away
            (a caller's app fails the call instead, within ``connect_timeout``).

    Returns:
        The app (not set as Celery's current app). The worker registers the task on
        it (:func:`toolproof.backends.celery_worker.worker_app`).

    """
    timeout = settings.connect_timeout
    app = Celery(
        "toolproof-worker" if worker else "toolproof",
        broker=settings.broker_url(),
        backend=settings.result_url(),
        set_as_current=False,
    )
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_default_queue=settings.queue,
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        task_publish_retry=False,
        worker_prefetch_multiplier=1,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        broker_connection_timeout=timeout,
        broker_connection_retry=worker,
        broker_connection_retry_on_startup=worker,
        broker_transport_options={
            "visibility_timeout": math.ceil(settings.visibility_timeout),
            "socket_connect_timeout": timeout,
            "max_retries": 0,
        },
        redis_socket_connect_timeout=timeout,
        redis_retry_on_timeout=False,
        result_backend_transport_options={"retry_policy": {"max_retries": 0}},
        result_expires=math.ceil(settings.result_expires),
        result_extended=False,
    )
    return app


def describe(url: str) -> str:
    """The URL as it may appear in messages (password hidden)."""
    return _redacted(url)


def close_app(app: Celery) -> None:
    """Close ``app``: its broker connections and its result backend's connections.

    ``Celery.close`` releases the broker pool only; the Redis result backend keeps a
    connection pool of its own (used for results and revoke marks).
    """
    app.close()
    close_result_backend(app.backend)


def close_result_backend(backend: Any) -> None:
    """Close a Celery result backend's connections: its result subscriber and its pool."""
    consumer = getattr(backend, "result_consumer", None)
    if consumer is not None:
        consumer.stop()  # closes its pubsub, if it opened one
    pool = getattr(getattr(backend, "client", None), "connection_pool", None)
    if pool is not None:
        pool.disconnect()
