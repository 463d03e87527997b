"""A Python tool's own declared input schema: ``@toolproof.tool(input_schema={...})``.

When a signature cannot say what the arguments are (a JSON Schema 2020-12 ``$schema``
and ``$defs``, ``$ref`` s, ``oneOf``, patterns the annotations do not carry), a
function declares its input schema itself. It is bound like a declared tool's
(:func:`toolproof.bind_contribution`): checked against the
:class:`~toolproof.schema.limits.SchemaLimits` (size, depth, reference expansion;
remote ``$ref`` refused), deep-copied and never rewritten, compiled once against its
metaschema. And it must fit the function:

* the root is an object schema (``"type": "object"``) with ``additionalProperties:
  false`` (and no ``patternProperties``) whose ``properties`` name exactly the
  function's parameters (a :class:`~toolproof.tools.context.Context` parameter aside);
* every parameter without a default, and every positional-only one, is ``required``;
* no ``*args``/``**kwargs``.

The body then receives exactly what the caller sent, as plain JSON (an object stays a
``dict``; the annotations convert nothing): omitted properties are left to the
function's defaults.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolproof.errors import ToolBindError
from toolproof.schema.limits import DEFAULT_LIMITS, SchemaLimits, prepare_schema
from toolproof.schema.refs import field_path
from toolproof.schema.validation import Validator, compile_validator

__all__ = ["OwnSchema", "bind_own_schema", "compile_checked"]


def compile_checked(tool: str, field: str, schema: dict[str, Any]) -> Validator:
    """Compile ``schema``; a schema its metaschema refuses is a :class:`ToolBindError`.

    Args:
        tool: the tool's name, for the error.
        field: the field holding the schema (``input_schema``, ``output_schema``).
        schema: a prepared schema (:func:`~toolproof.schema.limits.prepare_schema`).

    Raises:
        ToolBindError: ``field`` names the offending location
            (``input_schema.properties.a.type``), ``rule`` the metaschema's message.

    """
    try:
        return compile_validator(schema)
    except ValueError as exc:
        parts = tuple(getattr(exc, "instance_path", ()) or ())
        message = getattr(exc, "message", None) or str(exc).split("\n", 1)[0]
        raise ToolBindError(
            tool,
            field_path(field, parts),
            f"{message} (rule: the schema must be valid against its JSON Schema metaschema)",
        ) from exc


@dataclass(frozen=True)
class OwnSchema:
    """A function's declared input schema, checked and compiled.

    Attributes:
        schema: the private deep copy (as declared: ``$schema``, ``$defs`` kept).
        validator: its compiled validator.
        fanout: the subschemas it applies to one value, at most (see
            :class:`~toolproof.schema.limits.PreparedSchema`).

    """

    schema: dict[str, Any]
    validator: Validator
    fanout: int


def _fits(tool: str, fn: Callable[..., Any], schema: dict[str, Any], skip: set[str]) -> None:
    if schema.get("type") != "object":
        raise ToolBindError(
            tool,
            "input_schema.type",
            "a function's declared input schema must be an object schema "
            '("type": "object"): its properties are the parameters',
        )
    if schema.get("additionalProperties") is not False or "patternProperties" in schema:
        raise ToolBindError(
            tool,
            "input_schema.additionalProperties",
            "a function's declared input schema must set additionalProperties: false "
            "(and no patternProperties): the function takes only its named parameters",
        )
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if type(properties) is not dict:
        raise ToolBindError(tool, "input_schema.properties", "must be a JSON object")
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in skip]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolBindError(
                tool,
                f"parameter {param.name!r}",
                "bare *args/**kwargs cannot take a declared schema's properties; "
                "declare every parameter",
            )
        if param.name not in properties:
            known = ", ".join(sorted(properties)) or "none"
            raise ToolBindError(
                tool,
                f"parameter {param.name!r}",
                f"is not a property of the declared input_schema (properties: {known})",
            )
        must = param.default is param.empty or param.kind == param.POSITIONAL_ONLY
        if must and param.name not in required:
            why = "is positional-only" if param.default is not param.empty else "has no default"
            raise ToolBindError(
                tool,
                f"parameter {param.name!r}",
                f"{why}, so the declared input_schema must list it in required",
            )
    names = {param.name for param in params}
    for name in properties:
        if name not in names:
            raise ToolBindError(
                tool,
                field_path("input_schema.properties", (name,)),
                f"no parameter of the function takes it (parameters: "
                f"{', '.join(sorted(names)) or 'none'})",
            )


def bind_own_schema(
    tool: str,
    fn: Callable[..., Any],
    schema: Mapping[str, Any],
    skip: set[str],
    *,
    limits: SchemaLimits = DEFAULT_LIMITS,
) -> OwnSchema:
    """Check and compile the input schema ``fn`` declares (see the module rules).

    Args:
        tool: the tool's name, for errors.
        fn: the function (its signature is matched against the schema).
        schema: the declared JSON Schema (never modified).
        skip: parameters that are not arguments (the :class:`Context` ones).
        limits: the bounds applied (default
            :data:`~toolproof.schema.limits.DEFAULT_LIMITS`, as for declared tools).

    Returns:
        The :class:`OwnSchema`.

    Raises:
        ToolBindError: the schema breaks a limit or its metaschema, or does not fit the
            signature; ``field`` names the schema location or the parameter.

    """
    prepared = prepare_schema(tool, "input_schema", schema, limits)
    validator = compile_checked(tool, "input_schema", prepared.schema)
    _fits(tool, fn, prepared.schema, skip)
    return OwnSchema(prepared.schema, validator, prepared.fanout)
