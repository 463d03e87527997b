"""Registration forms: ``@extension`` (any kind) and the ``@wrapper``/``@transformer`` shorthands.

A ten-line wrapper::

    import toolproof

    @toolproof.wrapper(name="shout")
    async def shout(call_next, arguments, config):
        result = await call_next(arguments)
        if result.ok and isinstance(result.value, str):
            return toolproof.ToolResult.success(result.value.upper())
        return result

Each form registers into :func:`~toolproof.extensions.registry.default_registry`
unless ``registry=`` names another one (or ``register=False``) and returns the
:class:`~toolproof.extensions.registry.Extension`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, overload

from pydantic import BaseModel

from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import (
    Extension,
    ExtensionRegistry,
    Factory,
    default_registry,
    normalize_reserved,
)
from toolproof.extensions.schema import add_reserved, is_flat_object_schema
from toolproof.tools.tool import Tool

__all__ = [
    "CallNext",
    "WrapperFunction",
    "call_next_for",
    "extension",
    "register_extension",
    "transformer",
    "wrapper",
]

CallNext: TypeAlias = Callable[[dict[str, Any]], Awaitable[ToolResult]]
"""``await call_next(arguments) -> ToolResult``: run the next layer inward."""

WrapperFunction: TypeAlias = Callable[[CallNext, dict[str, Any], Any], Awaitable[Any]]
"""``async (call_next, arguments, config) -> ToolResult | JSON``: a wrapper's behaviour."""

Reserved: TypeAlias = Mapping[str, Mapping[str, Any]] | Sequence[str]


def register_extension(
    factory: Factory,
    *,
    kind: ExtensionKind | str,
    name: str,
    config: type[BaseModel] | None = None,
    reserved_params: Reserved = (),
    requires_body_locality: bool = False,
    version: str = "0",
    description: str = "",
    wants_context: bool = False,
    registry: ExtensionRegistry | None = None,
    register: bool = True,
    origin: str = "",
) -> Extension:
    """Register ``factory`` as the extension ``name`` (the function form of :func:`extension`).

    Args:
        factory: ``(inner: Tool, *, name: str, config) -> Tool`` returning the variant
            named ``name``.
        kind: the :class:`ExtensionKind`.
        name: the registered name; variants are named ``<tool>_<name>``.
        config: the pydantic model config tables are validated with (``None``: no config).
        reserved_params: parameter name -> JSON Schema (or just names) of parameters a
            wrapper adds to the variant's schema for itself.
        requires_body_locality: must sit inside any relocating (backend) extension.
        version: recorded in each variant's stack (so a new version changes fingerprints).
        description: one line for ``toolproof extensions list``.
        wants_context: the factory also receives ``context=`` (an ``ApplyContext``).
        registry: where to register (default: the process-wide registry).
        register: False to build the :class:`Extension` without registering it.
        origin: where it comes from, for listings (default: the factory's module).

    Returns:
        The :class:`Extension`.

    Raises:
        ExtensionError: a bad name, misplaced reserved params, or the name is taken.

    """
    module = origin or getattr(factory, "__module__", "") or ""
    ext = Extension(
        name=name,
        kind=ExtensionKind(kind),
        factory=factory,
        config=config,
        reserved_params=normalize_reserved(reserved_params),
        requires_body_locality=requires_body_locality,
        version=version,
        description=description or _first_line(factory),
        wants_context=wants_context,
        origin=module,
    )
    if register:
        (registry or default_registry()).register(ext)
    return ext


def _first_line(obj: Any) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""


def extension(
    *,
    kind: ExtensionKind | str,
    name: str,
    config: type[BaseModel] | None = None,
    reserved_params: Reserved = (),
    requires_body_locality: bool = False,
    version: str = "0",
    description: str = "",
    wants_context: bool = False,
    registry: ExtensionRegistry | None = None,
    register: bool = True,
) -> Callable[[Factory], Extension]:
    """Decorator form of :func:`register_extension` over a factory ``(inner, *, name, config)``."""

    def decorate(factory: Factory) -> Extension:
        return register_extension(
            factory,
            kind=kind,
            name=name,
            config=config,
            reserved_params=reserved_params,
            requires_body_locality=requires_body_locality,
            version=version,
            description=description,
            wants_context=wants_context,
            registry=registry,
            register=register,
        )

    return decorate


def call_next_for(inner: Tool, reserved: Sequence[str] | Mapping[str, Any] = ()) -> CallNext:
    """The ``call_next`` a wrapper layer uses: run ``inner`` on already-validated arguments.

    Without reserved params this is ``inner.run_validated`` itself (the outermost
    variant validated against the identical schema). With reserved params they are
    stripped first; the inner layer skips re-validation only when its schema is flat
    (:func:`~toolproof.extensions.schema.is_flat_object_schema`), else it validates.
    """
    drop = frozenset(reserved)
    if not drop:
        return inner.run_validated
    run = inner.run_validated if is_flat_object_schema(inner.spec.input_schema) else inner.call

    def call_next(arguments: dict[str, Any]) -> Awaitable[ToolResult]:
        return run({k: v for k, v in arguments.items() if k not in drop})

    return call_next


@overload
def wrapper(fn: WrapperFunction, /) -> Extension: ...


@overload
def wrapper(
    *,
    name: str | None = None,
    config: type[BaseModel] | None = None,
    reserved_params: Reserved = (),
    requires_body_locality: bool = False,
    version: str = "0",
    description: str = "",
    registry: ExtensionRegistry | None = None,
    register: bool = True,
) -> Callable[[WrapperFunction], Extension]: ...


def wrapper(
    fn: WrapperFunction | None = None,
    /,
    *,
    name: str | None = None,
    config: type[BaseModel] | None = None,
    reserved_params: Reserved = (),
    requires_body_locality: bool = False,
    version: str = "0",
    description: str = "",
    registry: ExtensionRegistry | None = None,
    register: bool = True,
) -> Any:
    """Register ``async fn(call_next, arguments, config)`` as a wrapper extension.

    The variant presents the inner input schema unchanged plus the declared
    ``reserved_params``; ``fn`` receives the arguments with them, ``call_next``
    strips them before the inner layer runs. ``fn`` returns a :class:`ToolResult`
    (usually ``call_next``'s) or a JSON value. Use bare (``@wrapper``, named after
    the function) or with options.

    Returns:
        The :class:`Extension` (or a decorator producing it).

    """

    def decorate(func: WrapperFunction) -> Extension:
        reserved = normalize_reserved(reserved_params)

        def factory(inner: Tool, *, name: str, config: Any) -> Tool:
            call_next = call_next_for(inner, reserved)
            spec = inner.spec.model_copy(
                update={
                    "name": name,
                    "input_schema": add_reserved(inner.spec.input_schema, reserved),
                }
            )
            return Tool(spec, lambda arguments: func(call_next, arguments, config))

        factory.__module__ = getattr(func, "__module__", factory.__module__)
        factory.__doc__ = func.__doc__
        return register_extension(
            factory,
            kind=ExtensionKind.WRAPPER,
            name=name or str(getattr(func, "__name__", "wrapper")),
            config=config,
            reserved_params=reserved,
            requires_body_locality=requires_body_locality,
            version=version,
            description=description,
            registry=registry,
            register=register,
        )

    return decorate(fn) if fn is not None else decorate


ArgumentMap: TypeAlias = Callable[[dict[str, Any], Any], dict[str, Any]]
SchemaOf: TypeAlias = Mapping[str, Any] | Callable[[ToolSpec, Any], Mapping[str, Any]]


def _schema(value: SchemaOf | None, spec: ToolSpec, config: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return dict(value(spec, config) if callable(value) else value)


def transformer(
    *,
    name: str,
    input_schema: SchemaOf,
    output: Callable[[Any, Any], Any] | None = None,
    output_schema: SchemaOf | None = None,
    description: str = "",
    config: type[BaseModel] | None = None,
    version: str = "0",
    registry: ExtensionRegistry | None = None,
    register: bool = True,
) -> Callable[[ArgumentMap], Extension]:
    """Register an argument mapping ``fn(arguments, config) -> inner arguments`` as a transformer.

    Args:
        name: the registered name.
        input_schema: the variant's own input schema, or ``(inner_spec, config) -> schema``.
        output: optional ``(value, config) -> value`` reshaping a successful result.
        output_schema: the schema of ``output``'s values (or a callable as above).
        description: the variant's description (default: the inner tool's).
        config: the config model.
        version: recorded in the stack.
        registry: where to register (default: the process-wide registry).
        register: False to only build the :class:`Extension`.

    The inner tool re-validates the mapped arguments (the mapping is arbitrary code).
    """

    def decorate(fn: ArgumentMap) -> Extension:
        def factory(inner: Tool, *, name: str, config: Any) -> Tool:
            spec = ToolSpec(
                name=name,
                version=inner.spec.version,
                description=description or inner.spec.description,
                input_schema=_schema(input_schema, inner.spec, config) or {},
                output_schema=_schema(output_schema, inner.spec, config),
                annotations=inner.spec.annotations,
            )
            call = inner.call

            async def body(arguments: dict[str, Any]) -> Any:
                result = await call(fn(arguments, config))
                if output is None or not result.ok:
                    return result
                return output(result.value, config)

            return Tool(spec, body)

        factory.__module__ = getattr(fn, "__module__", factory.__module__)
        factory.__doc__ = fn.__doc__
        return register_extension(
            factory,
            kind=ExtensionKind.TRANSFORMER,
            name=name,
            config=config,
            version=version,
            description=description,
            registry=registry,
            register=register,
        )

    return decorate
