"""Python parameters for a tool's JSON Schema properties, shared by the Python-facing adapters.

A property keeps its wire name; its Python name is the same when
:func:`toolproof.declarable_field` allows it (and no adapter reserves it), and an
alias otherwise (``from`` -> ``from_``, ``model_config`` -> ``field_model_config``,
``a.b`` -> ``a_b``). Annotations are derived for people and introspection only:
arguments are always validated by the tool's compiled JSON Schema, never by them.
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass
from typing import Any, Literal, Union

from toolproof.contract.tools import ToolSpec
from toolproof.errors import ToolBindError
from toolproof.schema.refs import RefWalker
from toolproof.tools.declared import declarable_field
from toolproof.tools.tool import Tool

__all__ = ["Param", "annotation_for", "object_schema", "params_of"]

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
    "object": dict[str, Any],
}
_SCALAR_TYPES = (str, int, bool, type(None))
_LITERAL: Any = Literal
_UNION: Any = Union
_LIST: Any = list


@dataclass(frozen=True)
class Param:
    """One property of a tool's arguments object, as a Python parameter.

    Attributes:
        wire: the property name on the wire (never changed).
        python: a Python identifier for it (``wire`` itself when declarable).
        annotation: a Python type derived from the property schema (``Any`` when unsure).
        required: whether the schema's ``required`` lists it.
        description: the property's ``description``, if any.

    """

    wire: str
    python: str
    annotation: Any
    required: bool
    description: str | None

    @property
    def aliased(self) -> bool:
        """Whether the Python name differs from the wire name."""
        return self.wire != self.python


def object_schema(tool: Tool | ToolSpec) -> dict[str, Any] | None:
    """The root object schema of ``tool`` (a tool or its spec; a root ``$ref`` followed).

    ``None`` when the root does not declare ``properties`` as an object.
    """
    spec = tool.spec if isinstance(tool, Tool) else tool
    schema: Any = spec.input_schema
    hops = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and hops < 8:
        walker = RefWalker(spec.input_schema, tool=spec.name, field="input_schema", draft=2020)
        walker.index()
        try:
            schema, _ = walker.lookup(walker.root_base, schema["$ref"], (None, "$ref"))
        except ToolBindError:
            return None
        hops += 1
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        return schema
    return None


def annotation_for(schema: Any) -> Any:
    """A Python annotation for a property schema (``Any`` when no simple type says it)."""
    if not isinstance(schema, dict):
        return Any
    if "const" in schema and type(schema["const"]) in _SCALAR_TYPES:
        return _LITERAL[schema["const"]]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(type(item) in _SCALAR_TYPES for item in enum):
        return _LITERAL[tuple(enum)]
    kinds = schema.get("type")
    if isinstance(kinds, str):
        return _annotation_for_type(kinds, schema)
    if isinstance(kinds, list) and kinds and all(isinstance(kind, str) for kind in kinds):
        return _union([_annotation_for_type(kind, schema) for kind in kinds])
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return _union([annotation_for(option) for option in options])
    return Any


def _annotation_for_type(kind: str, schema: dict[str, Any]) -> Any:
    if kind == "array":
        items = schema.get("items")
        return _LIST[annotation_for(items)] if isinstance(items, dict) else list[Any]
    return _JSON_TYPES.get(kind, Any)


def _union(options: list[Any]) -> Any:
    if any(option is Any for option in options):
        return Any
    unique = list(dict.fromkeys(options))
    try:
        return functools.reduce(operator.or_, unique)  # PEP 604: float | None
    except TypeError:
        return _UNION[tuple(unique)]


def _python_name(wire: str, taken: set[str], reserved: frozenset[str]) -> str:
    if declarable_field(wire) and wire not in reserved and wire not in taken:
        return wire
    base = re.sub(r"\W", "_", wire).strip("_") or "field"
    candidate = base if not base[0].isdigit() else f"p_{base}"
    if not declarable_field(candidate) or candidate in reserved:
        candidate = f"{candidate}_" if declarable_field(f"{candidate}_") else f"field_{candidate}"
    suffix = 1
    unique = candidate
    while unique in taken or unique in reserved or not declarable_field(unique):
        suffix += 1
        unique = f"{candidate}_{suffix}"
    return unique


def params_of(
    tool: Tool | ToolSpec, *, reserved: frozenset[str] = frozenset()
) -> list[Param] | None:
    """The tool's root properties as :class:`Param` s, in declaration order.

    Args:
        tool: the tool, or its spec.
        reserved: Python names an adapter needs for itself (aliased if declared).

    Returns:
        The parameters, or ``None`` when the root is not an object schema with
        ``properties``.

    """
    schema = object_schema(tool)
    if schema is None:
        return None
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    wires = list(schema["properties"])
    taken = {wire for wire in wires if declarable_field(wire) and wire not in reserved}
    params: list[Param] = []
    for wire in wires:
        sub = schema["properties"][wire]
        python = wire if wire in taken else _python_name(wire, taken, reserved)
        taken.add(python)
        description = sub.get("description") if isinstance(sub, dict) else None
        params.append(
            Param(
                wire=wire,
                python=python,
                annotation=annotation_for(sub),
                required=wire in required_names,
                description=description if isinstance(description, str) else None,
            )
        )
    return params
