"""The backend form: ``@backend`` turns ``make(config, context) -> Backend`` into an extension.

A backend moves the body's execution elsewhere (DESIGN.md section 6): its variant
sends the **name** of the tool inside it and the validated arguments, never a
closure, to a worker that rebuilt the same Toolset and looks that name up::

    @backend(name="pool", config=PoolConfig)
    def pool(config, context):
        return PoolBackend(context.config_path, workers=config.workers)

The built-in ``process`` and ``celery`` backends are built through this form too
(:mod:`toolproof.backends.builtin`). ``make`` is called once per Toolset and
config (the backend is kept in the Toolset's :class:`~toolproof.tools.resources.Resources`)
and the backend's ``aclose()`` runs when the Toolset closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, Unpack

from pydantic import BaseModel

from toolproof.backends.failures import FailureRule, qualified_name, rule_for
from toolproof.backends.protocol import Backend, BackendRequest, descriptor_digest
from toolproof.contract.tools import ToolResult
from toolproof.errors import ExtensionError
from toolproof.extensions.apply import ApplyContext
from toolproof.extensions.decorators import ExtensionOptions, checked_options, register_extension
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import Extension
from toolproof.failures import FailureKind, FailureWhere
from toolproof.identity import canonical_json
from toolproof.tools import hooks
from toolproof.tools.resources import ResourceKey
from toolproof.tools.tool import Tool

__all__ = ["BACKENDS", "MakeBackend", "backend", "relocated"]

MakeBackend: TypeAlias = Callable[[Any, ApplyContext | None], Backend]
"""``(config, context) -> Backend``; ``context`` is the ``ApplyContext`` (or None)."""

BACKENDS = ResourceKey[Backend]("backends.form")
"""The backends the form built in a Toolset, one per extension name and config."""


async def _close(client: Backend) -> None:
    await client.aclose()


def _backend_for(
    make: MakeBackend, ext_name: str, config: Any, context: ApplyContext | None
) -> Backend:
    toolset = context.toolset if context is not None else None
    if toolset is None:
        return make(config, context)
    dumped = config.model_dump(mode="json") if isinstance(config, BaseModel) else None
    settings = (ext_name, canonical_json(dumped))
    return toolset.resources.client(BACKENDS, settings, lambda: make(config, context), _close)


def with_call_options(
    inner: Tool, ext_name: str, call_options: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``inner``'s input schema plus the backend's call options as properties.

    Raises:
        ExtensionError: the schema is not ``type: object``, or a call option is
            already one of its parameters.

    """
    schema = dict(inner.spec.input_schema)
    properties = dict(schema.get("properties") or {})
    if schema.get("type") != "object":
        rule = f"the {ext_name} backend adds call options to an object schema (type: object)"
        raise ExtensionError(rule)
    for option, option_schema in call_options.items():
        if option in properties:
            rule = (
                f"call option {option!r} of the {ext_name} backend is already a parameter of "
                f"{inner.name!r} (rule: a reserved param must not shadow an input parameter)"
            )
            raise ExtensionError(rule)
        properties[option] = dict(option_schema)
    schema["properties"] = properties
    return schema


logger = logging.getLogger("toolproof.backends")

_SUBMIT_FAILED = FailureRule(FailureKind.BACKEND, FailureWhere.BACKEND, True, "failed")
"""An exception of ``submit`` the engine table does not know: the backend failed."""


async def _submit(client: Backend, request: BackendRequest, ext_name: str) -> ToolResult:
    try:
        return await client.submit(request)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the backend's own code: mapped, its cause logged, never raised
        rule = rule_for(exc) or _SUBMIT_FAILED
        logger.warning("backend %r failed to run %r", ext_name, request.variant, exc_info=exc)
        return ToolResult.fail(
            rule.kind,
            f"backend {ext_name!r} failed to run {request.variant!r}: {type(exc).__name__}: {exc}",
            where=rule.where,
            retryable=rule.retryable,
            detail={"exception": qualified_name(type(exc))},
        )


def relocated(
    inner: Tool,
    name: str,
    client: Backend,
    *,
    ext_name: str,
    timeout: float | None = None,
    call_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Tool:
    """The variant ``name`` whose body submits ``inner``'s name and the arguments to ``client``.

    Args:
        inner: the tool inside the backend (its name is what travels).
        name: the variant's name.
        client: the backend executing each call.
        ext_name: the backend extension's name (in failure messages).
        timeout: seconds per call, sent as :attr:`BackendRequest.timeout`.
        call_options: option name -> JSON Schema of per-call delivery options; they
            join the variant's schema and are removed from the arguments into
            :attr:`BackendRequest.options`, so they never reach the body.

    Returns:
        The variant. It validates arguments before ``client`` is called, so a bad
        call never reaches a worker; an exception from ``submit`` becomes the failure
        :data:`toolproof.backends.failures.ENGINE_FAILURES` gives it (else ``backend``,
        retryable, ``where="backend"``; ``detail.exception`` names its class and the
        traceback is logged on ``toolproof.backends``), never a fabricated success;
        cancellation propagates. With telemetry on each submit is a
        ``CLIENT`` span ``toolproof.backend.submit {inner}`` (``toolproof.backend``:
        ``ext_name``), current while the request is encoded, so the request carries
        its trace context to the worker.

    Raises:
        ExtensionError: ``call_options`` cannot join the inner schema (see
            :func:`with_call_options`).

    """
    target = inner.name
    digest: list[str] = []
    options_of = tuple(call_options or ())
    safe = inner.spec.annotations.is_idempotent or inner.spec.honours_key

    async def body(arguments: dict[str, Any]) -> ToolResult:
        if not digest:
            digest.append(descriptor_digest(inner))
        if options_of:
            options = {k: arguments[k] for k in options_of if k in arguments}
            arguments = {k: v for k, v in arguments.items() if k not in options_of}
            request = BackendRequest(
                target, arguments, digest[0], timeout, options, retry_safe=safe
            )
        else:
            request = BackendRequest(target, arguments, digest[0], timeout, retry_safe=safe)
        attributes = {"gen_ai.tool.name": target, "toolproof.backend": ext_name}
        with hooks.span(f"toolproof.backend.submit {target}", attributes, kind="client") as span:
            result = await _submit(client, request, ext_name)
            if result.failure is not None:
                hooks.fail(span, result.failure.kind, result.failure.message)
            return result

    update: dict[str, Any] = {"name": name}
    if call_options:
        update["input_schema"] = with_call_options(inner, ext_name, call_options)
    return Tool(
        inner.spec.model_copy(update=update),
        body,
        source=inner.source,
        deterministic=inner.deterministic,
        varies=inner.varies,
    )


def backend(
    *,
    name: str,
    call_options: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Unpack[ExtensionOptions],
) -> Callable[[MakeBackend], Extension]:
    """Register ``make(config, context) -> Backend`` as a backend extension.

    The variant presents the inner tool's schema (plus ``call_options``); its body
    awaits ``backend.submit(BackendRequest(inner.name, arguments, descriptor,
    timeout))``, where ``timeout`` is the config's ``timeout`` field (seconds) when
    the config model has one. An exception from ``submit`` becomes a ``backend``
    failure (retryable, ``where="backend"``), never a fabricated success;
    cancellation propagates.

    Args:
        name: the registered name.
        call_options: option name -> JSON Schema of per-call delivery options the
            variant adds to its schema and passes in :attr:`BackendRequest.options`.
        **options: see :class:`~toolproof.extensions.decorators.ExtensionOptions`.

    Returns:
        A decorator producing the registered :class:`Extension`.

    Raises:
        TypeError: an option no form takes.

    """
    checked_options("backend", options)
    ext_name = name

    def decorate(make: MakeBackend) -> Extension:
        def factory(inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
            client = _backend_for(make, ext_name, config, context)
            timeout = getattr(config, "timeout", None)
            return relocated(
                inner,
                name,
                client,
                ext_name=ext_name,
                timeout=timeout,
                call_options=call_options,
            )

        factory.__module__ = getattr(make, "__module__", factory.__module__)
        factory.__doc__ = make.__doc__
        return register_extension(
            factory, kind=ExtensionKind.BACKEND, name=name, wants_context=True, **options
        )

    return decorate
