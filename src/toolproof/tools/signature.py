"""What a Python function's signature says: parameter fields, JSON-native annotations.

The signature half of :mod:`toolproof.tools.function`: which pydantic field each
parameter becomes, which annotations a JSON value already satisfies (so the call
needs no pydantic conversion), and where a returned value holds a non-finite float.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
import warnings
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from toolproof.errors import ToolBindError
from toolproof.schema.property_names import declarable_field
from toolproof.schema.validation import MAX_ARGUMENT_DEPTH, strip_titles
from toolproof.tools.context import Context

__all__ = [
    "CONTEXT_FIELD",
    "arguments_model",
    "holds_int",
    "json_native",
    "json_schema_of",
    "non_finite",
    "parameter_fields",
    "return_adapter",
    "split_annotated",
    "top_level_int",
]


def _description_of(info: FieldInfo | None, metadata: list[Any]) -> str | None:
    if info is not None and info.description:
        return info.description
    for item in metadata:
        if isinstance(item, str):
            return item
    return None


def split_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    """``(base, metadata)`` of an ``Annotated[base, *metadata]``; ``(annotation, [])`` else."""
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, list(metadata)
    return annotation, []


CONTEXT_FIELD = "<context>"
"""The field name that marks a :class:`Context` parameter (not a schema field)."""


def _declarable(name: str) -> bool:
    # not "json", "schema", "copy"... (a field would shadow BaseModel) nor "_x"/"model_x":
    # such parameters are held under an alias and keep their name in the schema
    return declarable_field(name)


def parameter_fields(
    tool_name: str, fn: Callable[..., Any], hints: dict[str, Any], docs: dict[str, str]
) -> tuple[dict[str, Any], list[tuple[str, str, Any]]]:
    """The pydantic fields of ``fn``'s parameters and how each parameter is passed.

    Args:
        tool_name: the tool's name, for errors.
        fn: the function.
        hints: its resolved annotations (``typing.get_type_hints``).
        docs: per-parameter descriptions from the docstring.

    Returns:
        ``(fields, params)``: ``create_model`` field definitions by field name, and
        ``(parameter, field name, kind)`` per parameter in order (field
        :data:`CONTEXT_FIELD` for a :class:`Context` parameter, which has no field).

    Raises:
        ToolBindError: ``*args``/``**kwargs``, or a Context parameter not passed by name.

    """
    fields: dict[str, Any] = {}
    params: list[tuple[str, str, Any]] = []
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if split_annotated(hints.get(param.name))[0] is Context:
            if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolBindError(
                    tool_name, f"parameter {param.name!r}", "a Context parameter is passed by name"
                )
            params.append((param.name, CONTEXT_FIELD, param.kind))  # given, never sent
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolBindError(
                tool_name,
                f"parameter {param.name!r}",
                "bare *args/**kwargs cannot be described by a JSON Schema; declare every parameter",
            )
        annotation = hints.get(param.name, Any)
        base, metadata = split_annotated(annotation)
        info = next((m for m in metadata if isinstance(m, FieldInfo)), None)
        description = _description_of(info, metadata) or docs.get(param.name)
        default = ... if param.default is param.empty else param.default
        field_name = param.name if _declarable(param.name) else f"p{index}_"
        extra: dict[str, Any] = {}
        if field_name != param.name:
            extra["alias"] = param.name
        if description is not None:
            extra["description"] = description
        field = Field(default, **extra)
        if info is not None:
            field = FieldInfo.merge_field_infos(info, field)
        # keep constraints (annotated_types.Gt, StringConstraints...); strings became the
        # description and FieldInfo was merged above
        kept = [m for m in metadata if not isinstance(m, (str, FieldInfo))]
        fields[field_name] = (Annotated[(base, *kept, field)], field)
        params.append((param.name, field_name, param.kind))
    return {name: spec[0] for name, spec in fields.items()}, params


def _unbuildable(exc: PydanticUserError) -> str:
    """Pydantic's own words, first line (its message, without the documentation link)."""
    return str(exc).strip().splitlines()[0]


def arguments_model(tool_name: str, field_types: dict[str, Any]) -> type[BaseModel]:
    """The pydantic model of a function's arguments (extra arguments forbidden).

    Args:
        tool_name: the tool's name, for errors.
        field_types: :func:`parameter_fields`' field definitions by field name.

    Raises:
        ToolBindError: pydantic refuses to build it (a ``typing.TypedDict`` parameter on
            Python < 3.12, say); the field is ``parameters.<name>`` of the first parameter
            pydantic refuses alone (``parameters`` when none does), the rule pydantic's
            message. The load quarantines this one tool.

    """
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        return create_model(f"{tool_name}_arguments", __config__=config, **field_types)
    except PydanticUserError as exc:
        where = "parameters"
        for field, definition in field_types.items():
            try:
                create_model(f"{tool_name}_{field}", __config__=config, **{field: definition})
            except PydanticUserError:
                where = f"parameters.{field}"
                break
        rule = f"pydantic cannot build a model of it: {_unbuildable(exc)}"
        raise ToolBindError(tool_name, where, rule) from exc


def return_adapter(tool_name: str, annotation: Any) -> TypeAdapter[Any]:
    """The pydantic adapter of a return annotation.

    Raises:
        ToolBindError: pydantic refuses to build it (field ``return annotation``, the
            rule pydantic's message).

    """
    try:
        return TypeAdapter(annotation)
    except PydanticUserError as exc:
        rule = f"pydantic cannot build a model of it: {_unbuildable(exc)}"
        raise ToolBindError(tool_name, "return annotation", rule) from exc


def json_schema_of(adapter: TypeAdapter[Any] | type[BaseModel], tool_name: str, what: str) -> Any:
    """The JSON Schema of a return adapter (serialization) or an arguments model, untitled.

    Raises:
        ToolBindError: pydantic cannot describe it (``what`` names the part).

    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if isinstance(adapter, TypeAdapter):
                schema = adapter.json_schema(mode="serialization")
            else:
                schema = adapter.model_json_schema(mode="validation")
        except Exception as exc:
            raise ToolBindError(tool_name, what, f"no JSON Schema for it: {exc}") from exc
    return strip_titles(schema) if isinstance(schema, dict) else schema


def non_finite(value: Any, path: str) -> str | None:
    """Where ``value`` holds NaN or an infinity (inside containers and models), or None.

    Iterative, and a container nested past ``MAX_ARGUMENT_DEPTH`` is reported as such:
    a returned value is as untrusted as the arguments (issue 12 item 9).
    """
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{_path(path, where)}: {item!r} is not a JSON number"
            continue
        if isinstance(item, BaseModel):
            items: Any = item.__dict__.items()
        elif isinstance(item, dict):
            items = item.items()
        elif isinstance(item, (list, tuple)):
            items = enumerate(item)
        else:
            continue
        if depth >= MAX_ARGUMENT_DEPTH:
            return f"{_path(path, where)}: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
        stack.extend((child, (where, key), depth + 1) for key, child in items)
    return None


def _path(path: str, where: Any) -> str:
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return path + "".join(reversed(parts))


_JSON_SCALARS = (int, float, str, bool, type(None))
_NOT_FLOAT = (int, str, type(None))


def _members(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of ``annotation`` (``Annotated`` unwrapped; one for a non-union)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(member for item in get_args(annotation) for member in _members(item))
    return (annotation,)


def top_level_int(annotation: Any) -> bool:
    """Whether ``annotation`` is ``int``, possibly with ``None`` or ``str`` (``Optional[int]``).

    JSON Schema's ``integer`` accepts ``1.0``, so such a parameter is handed
    ``int(value)`` when the caller sent an integral float.
    """
    members = _members(annotation)
    return int in members and all(member in _NOT_FLOAT for member in members)


def holds_int(annotation: Any) -> bool:
    """Whether an ``int`` (or an integer ``Literal``) occurs anywhere in ``annotation``."""
    if annotation is int:
        return True
    if get_origin(annotation) is typing.Literal:
        return any(type(item) is int for item in get_args(annotation))
    return any(holds_int(item) for item in get_args(annotation))


def json_native(annotation: Any) -> bool:
    """Whether a value that passed the JSON Schema already is what the annotation wants.

    True for JSON scalars, ``Any``, ``Literal`` of scalars, unions, ``list[...]`` and
    ``dict[str, ...]`` of such, and ``Annotated`` with only descriptions, ``Field``
    constraints or ``annotated_types`` metadata (all checked by the schema). Enums,
    models, tuples, sets, dates and validators need pydantic to build the value.
    """
    if annotation is Any or annotation in _JSON_SCALARS:
        return True
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        base, *metadata = args
        return json_native(base) and all(
            isinstance(item, str | annotated_types.BaseMetadata)
            or (isinstance(item, FieldInfo) and not item.metadata and item.discriminator is None)
            for item in metadata
        )
    if origin is typing.Literal:
        return all(type(item) in (str, int, bool, type(None)) for item in args)
    if origin in (typing.Union, types.UnionType):
        return all(json_native(item) for item in args)
    if origin is list or annotation is list:
        return not args or json_native(args[0])
    if origin is dict or annotation is dict:
        return not args or (args[0] is str and json_native(args[1]))
    return False
