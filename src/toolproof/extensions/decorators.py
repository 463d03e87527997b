"""Registration forms: ``@extension`` (any kind) and the ``@wrapper``/``@transformer`` shorthands.

A ten-line wrapper::

    import toolproof

    @toolproof.wrapper(name="shout")
    async def shout(call_next, arguments, config):
        result = await call_next(arguments)
        if result.ok and isinstance(result.value, str):
            return toolproof.ToolResult.success(result.value.upper())
        return result

Each form takes its own few keywords and the shared :class:`ExtensionOptions` and
returns the :class:`~toolproof.extensions.extension.Extension`: the decorator marks
the function, it registers nothing by itself (there is no process-wide registry).
The composition root collects it: a module of extensions listed in ``[extensions]
modules`` (or named by a ``toolproof.extensions`` entry point) has its module-level
ones registered into the registry the root builds and passes; code that builds its
own registry passes ``registry=`` here, or calls ``registry.register(ext)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypedDict, Unpack, overload

from pydantic import BaseModel

from toolproof.contract.tools import ToolSpec
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.layer import CallNext, call_next_for
from toolproof.extensions.registry import (
    Extension,
    ExtensionRegistry,
    Factory,
    normalize_reserved,
)
from toolproof.extensions.schema import add_reserved
from toolproof.tools.tool import Tool

__all__ = [
    "CallNext",
    "ExtensionOptions",
    "WrapperFunction",
    "call_next_for",
    "extension",
    "register_extension",
    "transformer",
    "wrapper",
]

WrapperFunction: TypeAlias = Callable[[CallNext, dict[str, Any], Any], Awaitable[Any]]
"""``async (call_next, arguments, config) -> ToolResult | JSON``: a wrapper's behaviour."""

Reserved: TypeAlias = Mapping[str, Mapping[str, Any]] | Sequence[str]


class ExtensionOptions(TypedDict, total=False):
    """The options every extension form takes: one definition, shared by all of them.

    ``register_extension``, ``@extension``, ``@wrapper``, ``@transformer`` and
    ``@backend`` each take what only they need (a kind, a name, a wrapper's
    ``reserved_params``, a transformer's schemas) and then these, as keywords.

    Attributes:
        config: the pydantic model config tables are validated with (absent or
            ``None``: the extension takes no config).
        version: recorded in each variant's stack, so a new version changes
            fingerprints (default ``"0"``).
        description: one line for ``toolproof extensions list`` (default: the first
            line of the factory's docstring); a transformer's variant also takes it as
            its description.
        requires_body_locality: the layer must sit inside (before) any relocating
            (backend) extension of a combo (default False).
        registry: a registry to register into as well (default: none; the
            composition root collects module-level extensions itself).
        register: False to build the :class:`Extension` without registering it even
            when ``registry`` is given.
        origin: where it comes from, for listings (default: the factory's module).
    """

    config: type[BaseModel] | None
    version: str
    description: str
    requires_body_locality: bool
    registry: ExtensionRegistry | None
    register: bool
    origin: str


_OPTION_NAMES = frozenset(ExtensionOptions.__annotations__)


def checked_options(form: str, options: Mapping[str, Any]) -> Mapping[str, Any]:
    """``options`` after refusing a key no form takes (as Python refuses a keyword)."""
    unknown = sorted(set(options) - _OPTION_NAMES)
    if unknown:
        raise TypeError(f"{form}() got an unexpected keyword argument {unknown[0]!r}")
    return options


def register_extension(
    factory: Factory,
    *,
    kind: ExtensionKind | str,
    name: str,
    reserved_params: Reserved = (),
    wants_context: bool = False,
    **options: Unpack[ExtensionOptions],
) -> Extension:
    """Register ``factory`` as the extension ``name`` (the function form of :func:`extension`).

    Args:
        factory: ``(inner: Tool, *, name: str, config) -> Tool`` returning the variant
            named ``name``.
        kind: the :class:`ExtensionKind`.
        name: the registered name; variants are named ``<tool>_<name>``.
        reserved_params: parameter name -> JSON Schema (or just names) of parameters a
            wrapper adds to the variant's schema for itself.
        wants_context: the factory also receives ``context=`` (an ``ApplyContext``).
        **options: see :class:`ExtensionOptions`.

    Returns:
        The :class:`Extension`.

    Raises:
        ExtensionError: a bad name, misplaced reserved params, or the name is taken.
        TypeError: an option no form takes.

    """
    given = checked_options("register_extension", options)
    ext = Extension(
        name=name,
        kind=ExtensionKind(kind),
        factory=factory,
        config=given.get("config"),
        reserved_params=normalize_reserved(reserved_params),
        requires_body_locality=given.get("requires_body_locality", False),
        version=given.get("version", "0"),
        description=given.get("description") or _first_line(factory),
        wants_context=wants_context,
        origin=given.get("origin") or getattr(factory, "__module__", "") or "",
    )
    registry = given.get("registry")
    if registry is not None and given.get("register", True):
        registry.register(ext)
    return ext


def _first_line(obj: Any) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""


def extension(
    *,
    kind: ExtensionKind | str,
    name: str,
    reserved_params: Reserved = (),
    wants_context: bool = False,
    **options: Unpack[ExtensionOptions],
) -> Callable[[Factory], Extension]:
    """Decorator form of :func:`register_extension` over a factory ``(inner, *, name, config)``.

    Raises:
        TypeError: an option no form takes.
    """
    checked_options("extension", options)

    def decorate(factory: Factory) -> Extension:
        return register_extension(
            factory,
            kind=kind,
            name=name,
            reserved_params=reserved_params,
            wants_context=wants_context,
            **options,
        )

    return decorate


@overload
def wrapper(fn: WrapperFunction, /) -> Extension: ...


@overload
def wrapper(
    *,
    name: str | None = None,
    reserved_params: Reserved = (),
    **options: Unpack[ExtensionOptions],
) -> Callable[[WrapperFunction], Extension]: ...


def wrapper(
    fn: WrapperFunction | None = None,
    /,
    *,
    name: str | None = None,
    reserved_params: Reserved = (),
    **options: Unpack[ExtensionOptions],
) -> Any:
    """Register ``async fn(call_next, arguments, config)`` as a wrapper extension.

    The variant presents the inner input schema unchanged plus the declared
    ``reserved_params``; ``fn`` receives the arguments with them, ``call_next``
    strips them before the inner layer runs. ``fn`` returns a :class:`ToolResult`
    (usually ``call_next``'s) or a JSON value. Use bare (``@wrapper``, named after
    the function) or with options.

    Args:
        fn: the wrapper function (bare use), or omitted (use with options).
        name: the registered name (default: the function's ``__name__``).
        reserved_params: parameter name -> JSON Schema (or just names) the variant adds.
        **options: see :class:`ExtensionOptions`.

    Returns:
        The :class:`Extension` (or a decorator producing it).

    Raises:
        TypeError: an option no form takes.

    """
    checked_options("wrapper", options)

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
            reserved_params=reserved,
            **options,
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
    **options: Unpack[ExtensionOptions],
) -> Callable[[ArgumentMap], Extension]:
    """Register an argument mapping ``fn(arguments, config) -> inner arguments`` as a transformer.

    Args:
        name: the registered name.
        input_schema: the variant's own input schema, or ``(inner_spec, config) -> schema``.
        output: optional ``(value, config) -> value`` reshaping a successful result.
        output_schema: the schema of ``output``'s values (or a callable as above).
        **options: see :class:`ExtensionOptions`; ``description`` is also the
            variant's description (default: the inner tool's).

    The inner tool re-validates the mapped arguments (the mapping is arbitrary code).

    Raises:
        TypeError: an option no form takes.
    """
    description = checked_options("transformer", options).get("description", "")

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
        return register_extension(factory, kind=ExtensionKind.TRANSFORMER, name=name, **options)

    return decorate
