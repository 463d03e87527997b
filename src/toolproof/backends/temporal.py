"""The Temporal backend's shared parts: settings, the workflow and the activity names.

Needs the ``temporal`` extra (:func:`toolproof.version.install_hint`). This module
imports ``temporalio``; nothing in ``toolproof/__init__`` imports it.

One call is one workflow execution of :class:`CallWorkflow` (``toolproof.call``) that
runs one activity, ``toolproof.run``, whose single argument is the protocol request
(the canonical JSON text of variant name, arguments and descriptor digest, see
:mod:`toolproof.backends.protocol`) and whose result is the canonical JSON text of a
``ToolResult``. Workers are started with ``toolproof worker --config FILE --engine
temporal``; each builds the Toolset from that file once, so only the variant's *name*
and validated arguments travel, never a closure.

Ids and retries (docs/backends.md, docs/durability.md):

* the workflow id and the activity id are the call's idempotency key when it has one
  (a recording session's call), else ``toolproof-<uuid4>``; a second start with the
  same key attaches to the running execution, and the same key after a success is
  refused by Temporal (``ALLOW_DUPLICATE_FAILED_ONLY``), so the caller reads the
  first execution's result instead of acting again;
* the activity's retry policy follows the tool's declaration: a read-only,
  idempotent or keyed tool gets ``maximum_attempts = max_attempts``; any other tool
  ``maximum_attempts = 1`` (Temporal never runs it twice);
* each attempt's ``start_to_close`` timeout is the variant's ``timeout``; the worker
  heartbeats while the body runs, so a worker that dies fails its attempt after
  ``heartbeat`` seconds (then a retry-safe call runs again, on any worker, with the
  same activity id and key); the caller waits at most :func:`schedule_to_close`
  (or ``timeout``) + ``grace`` seconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

__all__ = [
    "ACTIVITY_NAME",
    "BACKOFF_MAX",
    "DEFAULT_ADDRESS",
    "DEFAULT_TASK_QUEUE",
    "ENV_ADDRESS",
    "WORKFLOW_NAME",
    "CallWorkflow",
    "TemporalSettings",
    "schedule_to_close",
    "settings_from",
]

DEFAULT_ADDRESS = "127.0.0.1:7233"
"""The Temporal frontend used when neither the config nor the environment names one."""

ENV_ADDRESS = "TOOLPROOF_TEMPORAL_ADDRESS"
"""Environment variable naming the frontend (``host:port``) when ``address`` is unset."""

DEFAULT_TASK_QUEUE = "toolproof"
"""The task queue workflows and activities go to unless told otherwise."""

WORKFLOW_NAME = "toolproof.call"
"""The workflow type: ``toolproof.call(request, activity_id, attempts, timeout_s, heartbeat_s)``."""

ACTIVITY_NAME = "toolproof.run"
"""The activity a toolproof worker serves: ``toolproof.run(request: str) -> str``."""


class TemporalSettings(BaseModel):
    """The ``[backends.temporal]`` table of ``toolproof.toml``.

    Attributes:
        address: the frontend's ``host:port``; default ``$TOOLPROOF_TEMPORAL_ADDRESS``,
            else :data:`DEFAULT_ADDRESS`.
        namespace: the Temporal namespace.
        task_queue: the default task queue (``--queue`` of the worker).
        connect_timeout: seconds to wait for the frontend before a call fails with
            ``kind="unavailable"``.
        heartbeat: the activity's heartbeat timeout (seconds): a worker that stops
            heartbeating (killed, cut off) fails its attempt after this long.
        grace: seconds the caller waits beyond the activity's own bound for the
            server to report it (or for a worker to take the call); then the
            workflow is terminated and the call fails with ``kind="timeout"``.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\[\]:-]{1,300}$")
    namespace: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,200}$")
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")
    connect_timeout: float = Field(default=5.0, gt=0, le=300)
    heartbeat: float = Field(default=5.0, gt=0, le=3600)
    grace: float = Field(default=10.0, ge=0, le=3600)

    def target(self) -> str:
        """The frontend address after the environment fallback."""
        return self.address or os.environ.get(ENV_ADDRESS) or DEFAULT_ADDRESS


def settings_from(backends: Mapping[str, Any] | None) -> TemporalSettings:
    """Validate the ``[backends.temporal]`` table of a config's ``backends`` section.

    Raises:
        pydantic.ValidationError: an unknown key or a bad value.

    """
    table = (backends or {}).get("temporal") or {}
    return TemporalSettings.model_validate(dict(table))


BACKOFF_MAX = 10.0
"""Seconds: the longest pause between two attempts (1 s, then doubling, up to this)."""


def schedule_to_close(timeout_s: float, max_attempts: int) -> float | None:
    """Seconds all attempts of one call may take together (``None``: one attempt, no bound).

    ``max_attempts`` attempts of ``timeout_s`` each, plus the pauses between them (at
    most :data:`BACKOFF_MAX` each). With one attempt there is nothing to bound beyond
    its own ``start_to_close`` (the caller bounds the wait for a worker).
    """
    if max_attempts <= 1:
        return None
    return max_attempts * timeout_s + (max_attempts - 1) * BACKOFF_MAX


@workflow.defn(name=WORKFLOW_NAME)
class CallWorkflow:
    """One tool call: run the ``toolproof.run`` activity once (or as its policy allows)."""

    @workflow.run
    async def run(
        self,
        request: str,
        activity_id: str,
        max_attempts: int,
        timeout_s: float,
        heartbeat_s: float,
    ) -> str:
        """Run the activity with id ``activity_id``; return its canonical ``ToolResult`` text.

        Args:
            request: the protocol request (canonical JSON text).
            activity_id: the call's idempotency key, or a fresh id.
            max_attempts: Temporal's ``maximum_attempts`` (1: never run twice).
            timeout_s: seconds for each attempt (``start_to_close``).
            heartbeat_s: the heartbeat timeout: a worker that stops heartbeating (it
                died) fails the attempt after this many seconds.

        Raises:
            temporalio.exceptions.ActivityError: the activity timed out, was
                cancelled or failed outside the tool body (the caller maps it).

        """
        total = schedule_to_close(timeout_s, max_attempts)
        result: str = await workflow.execute_activity(
            ACTIVITY_NAME,
            request,
            activity_id=activity_id,
            start_to_close_timeout=timedelta(seconds=timeout_s),
            schedule_to_close_timeout=None if total is None else timedelta(seconds=total),
            heartbeat_timeout=timedelta(seconds=heartbeat_s),
            retry_policy=RetryPolicy(
                maximum_attempts=max_attempts,
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=BACKOFF_MAX),
            ),
            result_type=str,
        )
        return result
