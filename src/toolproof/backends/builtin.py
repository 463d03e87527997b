"""The ``process``, ``sandbox``, ``celery`` and ``temporal`` BACKEND extensions.

``[tools.add] extensions = [["process"]]`` binds ``add_process``; its body sends the
name of the tool inside it (``add``) and the validated arguments to a worker that
rebuilt the same Toolset from the same ``toolproof.toml``. With
``[["local_probe", "process"]]`` the name that travels is ``add_local_probe``, so the
``local_probe`` layer runs in the worker, next to the body; ``[["process",
"local_probe"]]`` is refused by the apply site when ``local_probe`` requires body
locality.

Both factories need the composition-root file (``context.config_path``): a worker
can only rebuild a Toolset that a file describes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.backends.decorators import backend
from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import MAX_FRAME, Backend
from toolproof.backends.sandbox import SandboxConfig, SandboxPool
from toolproof.contract.bounds import Seconds
from toolproof.errors import BackendError, ExtensionError, validation_problem
from toolproof.extensions.apply import ApplyContext
from toolproof.extensions.registry import Extension
from toolproof.identity import canonical_json
from toolproof.tools.resources import ResourceKey
from toolproof.version import install_hint

__all__ = [
    "BACKEND_VERSION",
    "CALL_OPTIONS",
    "CELERY",
    "PROCESS",
    "PROCESS_POOLS",
    "SANDBOX",
    "SANDBOX_POOLS",
    "TEMPORAL",
    "CeleryConfig",
    "ProcessConfig",
    "TemporalConfig",
    "make_celery",
    "make_process",
    "make_sandbox",
    "make_temporal",
]

BACKEND_VERSION = "1"
"""The version recorded in the stack layer of the built-in backends."""


class ProcessConfig(BaseModel):
    """Config of the ``process`` backend.

    Attributes:
        timeout: seconds a call may run before its worker is killed (``None``: no limit).
        workers: worker processes in the pool.
        start_timeout: seconds a worker may take to build the Toolset.
        max_result_bytes: the largest result (bytes of canonical JSON) a worker sends
            back; a larger one is an ``invalid_result`` failure naming the limit.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds | None = None
    workers: int = Field(default=2, ge=1, le=64)
    start_timeout: Seconds = 30.0
    max_result_bytes: int = Field(default=MAX_FRAME, ge=1, le=MAX_FRAME)


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
"""The per-call options a Celery variant adds to its input schema: name -> JSON Schema.

They are validated with the arguments, then removed from them into
``BackendRequest.options``, so they never reach the body."""

PROCESS_POOLS = ResourceKey[ProcessPool]("backends.process.pools")
"""A Toolset's worker pools, one per composition root and pool settings."""


class CeleryConfig(BaseModel):
    """Config of the ``celery`` backend (broker settings live in ``[backends.celery]``).

    Attributes:
        timeout: seconds from publishing a call to its result, then the task is revoked.
        queue: this variant's default queue (default: ``[backends.celery] queue``).

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds = 300.0
    queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")


class TemporalConfig(BaseModel):
    """Config of the ``temporal`` backend (server settings live in ``[backends.temporal]``).

    Attributes:
        timeout: seconds each activity attempt may take (``start_to_close``); a call
            whose attempts all timed out fails with ``kind="timeout"``.
        task_queue: this variant's task queue (default: ``[backends.temporal] task_queue``).
        max_attempts: Temporal's ``maximum_attempts`` for a read-only, idempotent or
            keyed tool; any other tool gets 1.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds = 300.0
    task_queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")
    max_attempts: int = Field(default=3, ge=1, le=100)


def _needs_file(context: ApplyContext | None, backend: str) -> ApplyContext:
    if context is None or context.config_path is None:
        rule = (
            f"the {backend} backend needs a composition-root file (rule: a worker rebuilds "
            "the same Toolset from the same toolproof.toml; use load_toolset)"
        )
        raise ExtensionError(rule)
    return context


_S = TypeVar("_S")


def _needs_extra(backend: str, exc: ImportError) -> ExtensionError:
    rule = f"the {backend} backend needs its extra: {install_hint(backend)} ({exc})"
    return ExtensionError(rule)


def _engine_settings(
    ctx: ApplyContext,
    backend: str,
    settings_from: Callable[[Mapping[str, Any] | None], _S],
) -> _S:
    """The validated ``[backends.<backend>]`` table; a bad one names its first problem."""
    try:
        return settings_from(ctx.backends)
    except ValidationError as exc:
        first = validation_problem(exc)
        raise ExtensionError(f"[backends.{backend}] {first.where}: {first.message}") from None


def make_process(config: ProcessConfig, context: ApplyContext | None) -> Backend:
    """The ``process`` backend of a variant: a warm local worker pool.

    Variants with the same pool settings share one pool per Toolset (``timeout``
    travels with each request); no process starts before the first call, and
    closing the Toolset ends every worker.

    Raises:
        ExtensionError: applied without a composition-root file.

    """
    ctx = _needs_file(context, "process")
    path = ctx.config_path
    assert path is not None

    def create() -> ProcessPool:
        return ProcessPool(
            path,
            workers=config.workers,
            start_timeout=config.start_timeout,
            max_result_bytes=config.max_result_bytes,
        )

    if ctx.toolset is None:
        return create()
    key = (str(path), config.workers, config.start_timeout, config.max_result_bytes)
    return ctx.toolset.resources.client(PROCESS_POOLS, key, create)


SANDBOX_POOLS = ResourceKey[SandboxPool]("backends.sandbox.pools")
"""A Toolset's sandboxed worker pools, one per composition root and profile."""


def make_sandbox(config: SandboxConfig, context: ApplyContext | None) -> Backend:
    """The ``sandbox`` backend of a variant: a warm pool of bubblewrap-confined workers.

    Variants with the same profile share one pool per Toolset. The profile is the
    ``[backends.sandbox]`` table under the variant's own config (merged by the
    composition root, so it is in the variant's descriptor).

    Raises:
        ExtensionError: applied without a composition-root file, or the host lacks a
            mechanism the sandbox needs (the message names it; nothing runs unconfined).

    """
    ctx = _needs_file(context, "sandbox")
    path = ctx.config_path
    assert path is not None

    def create() -> SandboxPool:
        try:
            return SandboxPool(path, config)
        except BackendError as exc:
            raise ExtensionError(exc.message) from exc

    if ctx.toolset is None:
        return create()
    key = (str(path), canonical_json(config.model_dump(mode="json")))
    return ctx.toolset.resources.client(SANDBOX_POOLS, key, create)


def make_celery(config: CeleryConfig, context: ApplyContext | None) -> Backend:
    """The ``celery`` backend of a variant: a Celery client for ``toolproof worker``.

    The variant's schema is the inner one plus the call options ``queue``,
    ``countdown``, ``priority`` and ``expires`` (:data:`CALL_OPTIONS`). Variants share
    one Celery client per Toolset and settings; nothing connects before the first call.

    Raises:
        ExtensionError: no composition-root file, a bad ``[backends.celery]`` table,
            or Celery not installed.

    """
    ctx = _needs_file(context, "celery")
    try:
        from toolproof.backends.celery import settings_from
        from toolproof.backends.celery_backend import CeleryBackend
    except ImportError as exc:
        raise _needs_extra("celery", exc) from exc
    settings = _engine_settings(ctx, "celery", settings_from)
    if config.queue is not None:
        settings = settings.model_copy(update={"queue": config.queue})
    return CeleryBackend(settings, timeout=config.timeout)


def make_temporal(config: TemporalConfig, context: ApplyContext | None) -> Backend:
    """The ``temporal`` backend of a variant: a Temporal client for ``toolproof worker``.

    Nothing connects before the first call.

    Raises:
        ExtensionError: no composition-root file, a bad ``[backends.temporal]`` table,
            or ``temporalio`` not installed.

    """
    ctx = _needs_file(context, "temporal")
    try:
        from toolproof.backends.temporal import settings_from
        from toolproof.backends.temporal_backend import TemporalBackend
    except ImportError as exc:
        raise _needs_extra("temporal", exc) from exc
    settings = _engine_settings(ctx, "temporal", settings_from)
    return TemporalBackend(
        settings,
        timeout=config.timeout,
        max_attempts=config.max_attempts,
        task_queue=config.task_queue,
    )


PROCESS: Extension = backend(
    name="process",
    config=ProcessConfig,
    version=BACKEND_VERSION,
    description="Run the tool in a warm pool of local worker processes (kill on timeout).",
    register=False,
)(make_process)
"""The ``process`` backend extension."""

SANDBOX: Extension = backend(
    name="sandbox",
    config=SandboxConfig,
    version=BACKEND_VERSION,
    description=(
        "Run the tool in a warm pool of bubblewrap-confined workers: no network but an "
        "allow-list, a read-only filesystem but a per-call scratch directory."
    ),
    register=False,
)(make_sandbox)
"""The ``sandbox`` backend extension (needs Debian's ``bubblewrap`` on the host)."""

CELERY: Extension = backend(
    name="celery",
    call_options=CALL_OPTIONS,
    config=CeleryConfig,
    version=BACKEND_VERSION,
    description="Run the tool on a Celery worker (toolproof worker --config FILE).",
    register=False,
)(make_celery)
"""The ``celery`` backend extension (needs ``toolproof[celery]`` when applied)."""

TEMPORAL: Extension = backend(
    name="temporal",
    config=TemporalConfig,
    version=BACKEND_VERSION,
    description=(
        "Run the tool as a Temporal activity on any worker "
        "(toolproof worker --config FILE --engine temporal)."
    ),
    register=False,
)(make_temporal)
"""The ``temporal`` backend extension (needs ``toolproof[temporal]`` when applied)."""
