"""Tools from Python functions: ``@toolproof.tool`` and ``Tool.from_function``.

The input schema is derived from the signature with pydantic (defaults, ``Optional``,
``Literal``/``Enum``, nested models, ``list``/``dict``, ``Annotated`` descriptions),
descriptions from the docstring (Google, NumPy, reST and Epydoc styles, detected by
docstring-parser), the output schema from the return annotation. Annotations are
resolved with ``typing.get_type_hints`` when the tool is built, so
``from __future__ import annotations`` and forward references to names defined
later in the module work as long as the tool is built after the module is imported
(``load_toolset`` does that).
"""

from __future__ import annotations

import copy
import functools
import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import docstring_parser
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from toolproof.contract.tools import ToolAnnotations, ToolResult, ToolSpec
from toolproof.errors import ToolBindError
from toolproof.schema.own_schema import bind_own_schema
from toolproof.schema.validation import Validator
from toolproof.tools.content import mentions_content, rich_value
from toolproof.tools.context import Context
from toolproof.tools.signature import (
    CONTEXT_FIELD,
    arguments_model,
    holds_int,
    json_native,
    json_schema_of,
    non_finite,
    parameter_fields,
    return_adapter,
    top_level_int,
)
from toolproof.tools.sync_bodies import sync_bodies

__all__ = ["TOOL_MARK", "DirectCall", "FunctionBinding", "ToolOptions", "bind_function", "tool"]

TOOL_MARK = "__toolproof_tool__"
"""The attribute ``@toolproof.tool`` sets on a function to mark it as a tool."""


@dataclass(frozen=True)
class ToolOptions:
    """What ``@toolproof.tool(...)`` records about a function.

    Attributes:
        name: the tool name (default: the function's ``__name__``).
        description: overrides the docstring's description.
        version: the tool's version string.
        read_only: MCP ``readOnlyHint`` (``None``: not stated).
        destructive: MCP ``destructiveHint``.
        idempotent: MCP ``idempotentHint``.
        open_world: MCP ``openWorldHint``.
        title: MCP annotation ``title``.
        deterministic: False when identical calls may give different results.
        varies: what varies when not deterministic (``clock``, ``network``...).
        input_schema: the tool's own declared input schema (JSON Schema, ``$schema``
            and ``$defs`` kept as given) instead of the one derived from the
            signature; ``None``: derived. See :mod:`toolproof.schema.own_schema`.
        idempotency: ``"key"``: the body honours the call's idempotency key (acts at
            most once per ``context.idempotency_key``), so ``retry`` may run it again
            (``ToolSpec.idempotency``; docs/durability.md).

    """

    name: str | None = None
    description: str | None = None
    version: str = "0"
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    title: str | None = None
    deterministic: bool = True
    varies: tuple[str, ...] = ()
    input_schema: Mapping[str, Any] | None = None
    idempotency: Literal["key"] | None = None

    def __post_init__(self) -> None:
        if self.idempotency not in (None, "key"):
            raise ValueError(
                f"idempotency={self.idempotency!r} is not an option (rule: 'key', the body "
                "honours the call's idempotency key, or None)"
            )

    def annotations(self) -> ToolAnnotations:
        """The MCP :class:`ToolAnnotations` these options state."""
        return ToolAnnotations(
            title=self.title,
            readOnlyHint=self.read_only,
            destructiveHint=self.destructive,
            idempotentHint=self.idempotent,
            openWorldHint=self.open_world,
        )


F = typing.TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    version: str = "0",
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    title: str | None = None,
    deterministic: bool = True,
    varies: tuple[str, ...] = (),
    input_schema: Mapping[str, Any] | None = None,
    idempotency: Literal["key"] | None = None,
) -> Callable[[F], F]: ...


def tool(fn: Any = None, /, **options: Any) -> Any:
    """Mark a function as a tool for a ``[[python]]`` entry of ``toolproof.toml``.

    Use bare (``@toolproof.tool``) or with options (``@toolproof.tool(read_only=True)``;
    see :class:`ToolOptions`). The function is returned unchanged and stays callable;
    the tool itself is built when the Toolset is loaded, after the module is imported,
    so forward references resolve. With ``input_schema={...}`` the tool lists that
    schema instead of one derived from the signature; it is checked when the tool is
    bound (:mod:`toolproof.schema.own_schema`), and a schema that does not fit the
    signature is a :class:`~toolproof.errors.ToolBindError` (quarantined by
    ``load_toolset``).
    """
    opts = ToolOptions(**options)

    def mark(func: F) -> F:
        setattr(func, TOOL_MARK, opts)
        return func

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class DirectCall:
    """An async function whose validated arguments it takes as they are: ``Tool`` may run it inline.

    Given only when every parameter is passed by name, no parameter needs pydantic to
    build its value (:func:`json_native`, no ``int`` inside a container), no parameter
    is a :class:`Context`, and the return annotation needs no conversion either. Then
    ``await fn(**arguments)`` on arguments that passed the input schema is exactly the
    call the body would make, once an integral float sent to an ``int_params`` parameter
    is turned into an ``int`` (JSON Schema's ``integer`` accepts ``1.0``).

    Attributes:
        fn: the async function (or async callable object).
        int_params: the parameters annotated ``int`` (possibly ``Optional[int]``).
        finish: the body's result step, ``value -> JSON value | ToolResult`` (a
            returned :class:`ToolResult` passes through, a rich value becomes content,
            a model is dumped); it returns a ``str``, ``int``, ``bool`` or ``None``
            unchanged, so a caller may skip it for those.
    """

    fn: Callable[..., Awaitable[Any]]
    int_params: tuple[str, ...]
    finish: Callable[[Any], Any]


@dataclass(frozen=True)
class FunctionBinding:
    """What binding a Python function produces: the parts of its :class:`~toolproof.Tool`.

    ``Tool.from_function`` builds the tool from them (``tool.py`` imports this module,
    never the other way round).

    Attributes:
        spec: the tool's wire description.
        body: the async body (validated arguments object -> JSON value).
        source: ``python:<module>.<qualname>``.
        deterministic: False when identical calls may give different results.
        varies: what varies when not deterministic.
        validator: the compiled input validator of a declared input schema, else
            ``None`` (the Tool compiles the derived one).
        fanout: the declared schema's fanout bound, else ``None`` (measured by the Tool).
        direct: how to run the function inline, when it allows it (see
            :class:`DirectCall`), else ``None``; ``body`` always works.
    """

    spec: ToolSpec
    body: Callable[[dict[str, Any]], Awaitable[Any]]
    source: str
    deterministic: bool
    varies: tuple[str, ...]
    validator: Validator | None = None
    fanout: int | None = None
    direct: DirectCall | None = None


def bind_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    version: str = "0",
    options: ToolOptions | None = None,
    localns: dict[str, Any] | None = None,
) -> FunctionBinding:
    """Bind ``fn`` (sync or async): the parts of its tool (``Tool.from_function`` builds it).

    Args:
        fn: the function. Sync functions run on the bounded thread pool of
            :mod:`toolproof.tools.sync_bodies` and never block the event loop.
        name: the tool name; default ``options.name`` or ``fn.__name__``.
        description: default ``options.description`` or the docstring's description.
        version: the tool's version (``options.version`` wins when given there).
        options: what ``@toolproof.tool`` recorded; read from ``fn`` when omitted.
        localns: extra names for resolving string annotations (a function defined in
            another function's body).

    Returns:
        The tool's parts. Its input schema has no ``title`` keywords, carries
        ``additionalProperties: false`` (an unknown argument is refused), and
        per-argument ``description`` from ``Annotated[..., Field(description=...)]``,
        ``Annotated[..., "text"]`` or the docstring, in that order.

        With ``options.input_schema`` the input schema is that declaration instead
        (checked, deep-copied, never rewritten: :mod:`toolproof.schema.own_schema`) and
        the body receives the caller's JSON object as it is.

    Raises:
        ToolBindError: ``*args``/``**kwargs``, an annotation that cannot be resolved,
            a type pydantic cannot build a model of or describe (``typing.TypedDict`` on
            Python < 3.12: field ``parameters.<name>``, rule pydantic's message), or a
            declared input schema that breaks a limit, its metaschema, or does not fit
            the signature.

    """
    opts = options or getattr(fn, TOOL_MARK, None) or ToolOptions()
    # a callable object (not a function or method) is described by its __call__
    target = fn if inspect.isroutine(fn) or not callable(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    default_name = getattr(fn, "__name__", None) or type(fn).__name__
    tool_name: str = name or opts.name or str(default_name)
    try:
        hints = typing.get_type_hints(target, localns=localns, include_extras=True)
    except Exception as exc:
        raise ToolBindError(
            tool_name, "annotations", f"cannot resolve the annotations: {exc}"
        ) from exc
    if target is fn:
        doc = inspect.getdoc(fn)
    else:  # the object's own docs: __call__'s (with its Args), else its class's; never object's
        doc = vars(type(fn)).get("__call__", fn).__doc__ or vars(type(fn)).get("__doc__")
    parsed = docstring_parser.parse(inspect.cleandoc(doc) if doc else "")
    docs = {p.arg_name: p.description for p in parsed.params if p.description}
    text = "\n\n".join(part for part in (parsed.short_description, parsed.long_description) if part)
    field_types, params = parameter_fields(tool_name, fn, hints, docs)
    own = None
    model: type[BaseModel] | None = None
    if opts.input_schema is not None:
        contexts = {param for param, field, _ in params if field == CONTEXT_FIELD}
        own = bind_own_schema(tool_name, target, opts.input_schema, contexts)
        input_schema = own.schema
        # no aliases: the body gets the caller's names and values as sent
        params = [
            (param, field if field == CONTEXT_FIELD else param, kind)
            for param, field, kind in params
        ]
    else:
        model = arguments_model(tool_name, field_types)
        input_schema = json_schema_of(model, tool_name, "parameters")
    ret = hints.get("return", inspect.Signature.empty)
    output_adapter: TypeAdapter[Any] | None = None
    output_schema = None
    if ret not in (inspect.Signature.empty, None, type(None)) and not mentions_content(ret):
        output_adapter = return_adapter(tool_name, ret)
        output_schema = json_schema_of(output_adapter, tool_name, "return annotation")
    spec = ToolSpec(
        name=tool_name,
        version=opts.version if opts.version != "0" else version,
        description=description or opts.description or text,
        input_schema=input_schema,
        output_schema=copy.deepcopy(output_schema),
        annotations=opts.annotations(),
        idempotency=opts.idempotency,
    )
    # int parameters take int(1.0) on the direct path; an int inside a container (list[int],
    # dict[str, int], a Literal) needs pydantic's conversion: no direct path then
    int_params = (
        []
        if own is not None
        else [name for name, _, _ in params if top_level_int(hints.get(name, Any))]
    )
    direct = all(
        json_native(hints.get(name, Any))
        and (name in int_params or not holds_int(hints.get(name, Any)))
        for name, field, _ in params
        if field != CONTEXT_FIELD
    )
    if output_adapter is not None and json_native(ret):
        output_adapter = None  # a plain JSON value: Tool checks it against the output schema
    finish = _result_step(tool_name, output_adapter)
    body = _make_body(tool_name, fn, model, params, finish, direct=direct, int_params=int_params)
    inline = None
    if (
        (direct or model is None)  # a declared input schema: the body passes the JSON as is
        and output_adapter is None
        and _is_async(fn)
        and all(kind != inspect.Parameter.POSITIONAL_ONLY for _, _, kind in params)
        and all(field != CONTEXT_FIELD for _, field, _ in params)
    ):
        inline = DirectCall(fn, tuple(int_params), finish)
    module = getattr(fn, "__module__", "?")
    qualname = getattr(fn, "__qualname__", tool_name)
    return FunctionBinding(
        spec,
        body,
        source=f"python:{module}.{qualname}",
        deterministic=opts.deterministic,
        varies=tuple(opts.varies),
        validator=None if own is None else own.validator,
        fanout=None if own is None else own.fanout,
        direct=inline,
    )


def _direct_arguments(
    arguments: dict[str, Any],
    positional_names: list[str],
    int_keywords: tuple[str, ...],
    int_positions: tuple[int, ...],
) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of a direct call; an ``int`` parameter sent ``1.0`` gets ``1``.

    JSON Schema's ``"integer"`` accepts an integral float, the annotation says ``int``.
    """
    args = [arguments[name] for name in positional_names]
    kwargs = {k: v for k, v in arguments.items() if k not in positional_names}
    for name in int_keywords:
        if type(kwargs.get(name)) is float:
            kwargs[name] = int(kwargs[name])
    for index in int_positions:
        if type(args[index]) is float:
            args[index] = int(args[index])
    return args, kwargs


def _is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns an awaitable (a coroutine function or such ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


_UNCHANGED: frozenset[type] = frozenset({str, int, float, bool, type(None), dict})
"""Return types the result step hands on unchanged when there is no output adapter."""


def _result_step(tool_name: str, output_adapter: TypeAdapter[Any] | None) -> Callable[[Any], Any]:
    """The body's last step: the function's return value -> a JSON value or a ToolResult."""

    def finish(value: Any) -> Any:
        if output_adapter is None and type(value) in _UNCHANGED:
            return value  # neither rich, a ToolResult nor a model: Tool checks it as it is
        if type(value) is ToolResult:
            return value  # the function reports its own outcome: passed through as it is
        try:
            rich = rich_value(value)
        except TypeError as exc:
            return ToolResult.fail(
                "invalid_result", f"tool {tool_name!r} returned {exc}", where="output"
            )
        if rich is not None:
            return rich  # Image, Audio, ... or a list of them: the MCP content value
        if output_adapter is None and not isinstance(value, BaseModel):
            return value  # Tool checks it is plain JSON (else invalid_result)
        problem = non_finite(value, "$")
        if problem is not None:  # pydantic would write it as null: refuse instead
            return ToolResult.fail(
                "invalid_result",
                f"tool {tool_name!r} returned a value that is not plain JSON: {problem}",
                where="output",
            )
        try:
            if output_adapter is None:
                return value.model_dump(mode="json", warnings="error")
            return output_adapter.dump_python(value, mode="json", warnings="error")
        except PydanticSerializationError as exc:
            return ToolResult.fail(
                "invalid_result",
                f"tool {tool_name!r} returned a value that does not match its return "
                f"annotation: {str(exc).splitlines()[-1].strip()}",
                where="output",
            )

    return finish


def _make_body(
    tool_name: str,
    fn: Callable[..., Any],
    model: type[BaseModel] | None,
    params: list[tuple[str, str, Any]],
    finish: Callable[[Any], Any],
    *,
    direct: bool = False,
    int_params: list[str] | None = None,
) -> Callable[[dict[str, Any]], Any]:
    is_async = _is_async(fn)
    contexts = [param for param, field, _ in params if field == CONTEXT_FIELD]
    params = [entry for entry in params if entry[1] != CONTEXT_FIELD]
    positional = [field for _, field, kind in params if kind == inspect.Parameter.POSITIONAL_ONLY]
    keyword = [
        (param, field) for param, field, kind in params if kind != inspect.Parameter.POSITIONAL_ONLY
    ]

    positional_names = [
        param for param, _, kind in params if kind == inspect.Parameter.POSITIONAL_ONLY
    ]
    integers = set(int_params or ())
    int_keywords = tuple(name for name in integers if name not in positional_names)
    int_positions = tuple(i for i, name in enumerate(positional_names) if name in integers)

    async def body(arguments: dict[str, Any]) -> Any:
        if model is None or (direct and all(name in arguments for name in positional_names)):
            # The schema already checked every value and these annotations need no
            # conversion: call as Python would, its own defaults filling the rest.
            args, kwargs = _direct_arguments(
                arguments, positional_names, int_keywords, int_positions
            )
        else:
            try:
                parsed = model.model_validate(arguments)
            except ValidationError as exc:
                return ToolResult.fail(
                    "invalid_arguments",
                    f"invalid arguments: {exc.errors(include_url=False)[0]['msg']} "
                    f"at {'/'.join(str(p) for p in exc.errors()[0]['loc'])}",
                    where="arguments",
                )
            args = [getattr(parsed, field) for field in positional]
            kwargs = {param: getattr(parsed, field) for param, field in keyword}
        for name in contexts:
            kwargs[name] = Context()  # asked for by type: the running call's context
        if is_async:
            value = await fn(*args, **kwargs)
        else:
            value = await sync_bodies().run(tool_name, functools.partial(fn, *args, **kwargs))
        return finish(value)

    return body
