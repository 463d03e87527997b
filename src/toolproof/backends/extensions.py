"""The ``process`` and ``celery`` BACKEND extensions.

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

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import MAX_FRAME, descriptor_digest
from toolproof.contract.bounds import Seconds
from toolproof.contract.tools import ToolResult
from toolproof.errors import ExtensionError, validation_problem
from toolproof.extensions.apply import ApplyContext
from toolproof.tools import hooks
from toolproof.tools.tool import Tool

__all__ = [
    "BACKEND_VERSION",
    "CeleryConfig",
    "ProcessConfig",
    "celery_factory",
    "process_factory",
    "relocated",
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


class CeleryConfig(BaseModel):
    """Config of the ``celery`` backend (broker settings live in ``[backends.celery]``).

    Attributes:
        timeout: seconds from publishing a call to its result, then the task is revoked.
        queue: this variant's default queue (default: ``[backends.celery] queue``).

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds = 300.0
    queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")


def relocated(
    inner: Tool,
    name: str,
    submit: Callable[[str, dict[str, Any], str], Awaitable[ToolResult]],
    *,
    input_schema: dict[str, Any] | None = None,
    backend: str = "backend",
) -> Tool:
    """The variant ``name`` whose body hands ``inner``'s name and the arguments to ``submit``.

    Args:
        inner: the tool inside the backend (its name is what travels).
        name: the variant's name.
        submit: ``(variant, arguments, descriptor digest) -> ToolResult``.
        input_schema: the variant's schema (default: ``inner``'s, unchanged).
        backend: the backend's name, for telemetry (``toolproof.backend``).

    Returns:
        The variant. It validates arguments before ``submit`` is called, so a bad
        call never reaches a worker. With telemetry on each submit is a ``CLIENT``
        span ``toolproof.backend.submit {inner}``, current while the request is built,
        so the request carries its trace context to the worker.

    """
    digest: list[str] = []

    async def body(arguments: dict[str, Any]) -> ToolResult:
        if not digest:
            digest.append(descriptor_digest(inner))
        hook = hooks.ACTIVE
        if hook is None:
            return await submit(inner.name, arguments, digest[0])
        attributes = {"gen_ai.tool.name": inner.name, "toolproof.backend": backend}
        name = f"toolproof.backend.submit {inner.name}"
        with hook.span(name, attributes, kind="client") as span:
            result = await submit(inner.name, arguments, digest[0])
            if result.failure is not None:
                hook.fail(span, result.failure.kind, result.failure.message)
            return result

    update: dict[str, Any] = {"name": name}
    if input_schema is not None:
        update["input_schema"] = input_schema
    return Tool(
        inner.spec.model_copy(update=update),
        body,
        source=inner.source,
        deterministic=inner.deterministic,
        varies=inner.varies,
    )


def _needs_file(context: ApplyContext | None, backend: str) -> ApplyContext:
    if context is None or context.config_path is None:
        rule = (
            f"the {backend} backend needs a composition-root file (rule: a worker rebuilds "
            "the same Toolset from the same toolproof.toml; use load_toolset)"
        )
        raise ExtensionError(rule, rule=rule)
    return context


def process_factory(
    inner: Tool, *, name: str, config: ProcessConfig, context: ApplyContext | None = None
) -> Tool:
    """Build the ``process`` variant: ``inner`` runs in a warm local worker pool.

    Variants with the same pool settings share one pool per Toolset; no process
    starts before the first call, and closing the Toolset ends every worker.

    Raises:
        ExtensionError: applied without a composition-root file.

    """
    ctx = _needs_file(context, "process")
    toolset = ctx.toolset
    key = (str(ctx.config_path), config.workers, config.start_timeout, config.max_result_bytes)
    pools: dict[tuple[str, int, float, int], ProcessPool]
    pools = toolset.metadata.setdefault("process_pools", {}) if toolset is not None else {}
    pool = pools.get(key)
    if pool is None:
        assert ctx.config_path is not None
        pool = ProcessPool(
            ctx.config_path,
            workers=config.workers,
            start_timeout=config.start_timeout,
            max_result_bytes=config.max_result_bytes,
        )
        pools[key] = pool
        if toolset is not None:
            toolset.on_close(pool.aclose)
    timeout = config.timeout

    async def submit(variant: str, arguments: dict[str, Any], descriptor: str) -> ToolResult:
        return await pool.call(variant, arguments, descriptor, timeout=timeout)

    return relocated(inner, name, submit, backend="process")


def _celery_schema(inner: Tool) -> dict[str, Any]:
    from toolproof.backends.celery_backend import CALL_OPTIONS

    schema = dict(inner.spec.input_schema)
    properties = dict(schema.get("properties") or {})
    if schema.get("type") != "object":
        rule = "the celery backend adds call options to an object schema (type: object)"
        raise ExtensionError(rule, rule=rule)
    for option, option_schema in CALL_OPTIONS.items():
        if option in properties:
            rule = (
                f"call option {option!r} of the celery backend is already a parameter of "
                f"{inner.name!r} (rule: a reserved param must not shadow an input parameter)"
            )
            raise ExtensionError(rule, rule=rule)
        properties[option] = option_schema
    schema["properties"] = properties
    return schema


def celery_factory(
    inner: Tool, *, name: str, config: CeleryConfig, context: ApplyContext | None = None
) -> Tool:
    """Build the ``celery`` variant: ``inner`` runs on a ``toolproof worker``.

    The variant's schema is ``inner``'s plus the call options ``queue``,
    ``countdown``, ``priority`` and ``expires``, which are validated and then
    removed before the request is built. Variants share one Celery client per
    Toolset and settings; nothing connects before the first call.

    Raises:
        ExtensionError: no composition-root file, a bad ``[backends.celery]`` table,
            Celery not installed, or a call option shadowing a parameter.

    """
    ctx = _needs_file(context, "celery")
    try:
        from toolproof.backends.celery import settings_from
        from toolproof.backends.celery_backend import CALL_OPTIONS, CeleryBackend
    except ImportError as exc:
        rule = f"the celery backend needs its extra: pip install 'toolproof[celery]' ({exc})"
        raise ExtensionError(rule, rule=rule) from exc
    try:
        settings = settings_from(ctx.backends)
    except ValidationError as exc:
        first = validation_problem(exc)
        where = first.where
        rule = f"[backends.celery] {where}: {first.message}"
        raise ExtensionError(rule, rule=rule) from None
    if config.queue is not None:
        settings = settings.model_copy(update={"queue": config.queue})
    schema = _celery_schema(inner)
    clients: dict[tuple[str, float], CeleryBackend] = {}
    if ctx.toolset is not None:
        clients = ctx.toolset.metadata.setdefault("celery_clients", {})
    key = (settings.model_dump_json(), config.timeout)
    client = clients.get(key)
    if client is None:
        client = CeleryBackend(settings, timeout=config.timeout)
        clients[key] = client
        if ctx.toolset is not None:
            backend = client

            async def close() -> None:
                await backend.aclose()

            ctx.toolset.on_close(close)

    async def submit(variant: str, arguments: dict[str, Any], descriptor: str) -> ToolResult:
        options = {k: arguments[k] for k in CALL_OPTIONS if k in arguments}
        plain = {k: v for k, v in arguments.items() if k not in CALL_OPTIONS}
        return await client.submit(variant, plain, descriptor, options)

    return relocated(inner, name, submit, input_schema=schema, backend="celery")
