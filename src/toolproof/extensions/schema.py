"""Input-schema rules of the apply site: reserved params, differences, concreteness."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "add_reserved",
    "first_difference",
    "is_concrete",
    "is_flat_object_schema",
    "strip_reserved",
]

_FLAT_KEYS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "description",
        "title",
        "$defs",
        "definitions",
        "$schema",
        "$id",
        "$comment",
        "default",
        "examples",
    }
)


def add_reserved(
    schema: Mapping[str, Any], reserved: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Return a deep copy of ``schema`` with the reserved params added as optional properties."""
    out = copy.deepcopy(dict(schema))
    if reserved:
        properties = dict(out.get("properties") or {})
        for name, sub in reserved.items():
            properties[name] = copy.deepcopy(dict(sub))
        out["properties"] = properties
    return out


def strip_reserved(schema: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``schema`` without the ``names`` properties (and their ``required``)."""
    drop = set(names)
    out = dict(schema)
    if not drop:
        return out
    properties = out.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {k: v for k, v in properties.items() if k not in drop}
    required = out.get("required")
    if isinstance(required, list):
        out["required"] = [k for k in required if k not in drop]
    return out


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def first_difference(expected: Any, actual: Any, pointer: str = "") -> str | None:
    """Return the JSON Pointer of the first place ``actual`` differs from ``expected``.

    Keys are visited in sorted order, so the answer is stable; ``None`` means equal
    (``1`` and ``1.0`` and ``True`` are all told apart, as JSON Schema keywords must be).
    """
    if type(expected) is not type(actual):
        return pointer or "/"
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                return f"{pointer}/{_escape(key)}"
            found = first_difference(expected[key], actual[key], f"{pointer}/{_escape(key)}")
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        for index, (left, right) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(left, right, f"{pointer}/{index}")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return f"{pointer}/{min(len(expected), len(actual))}"
        return None
    return None if expected == actual else (pointer or "/")


def is_concrete(schema: Any) -> bool:
    """Whether ``schema`` declares its parameters (not a bare ``*args/**kwargs`` object).

    Concrete means an object schema with a ``properties`` table; with no declared
    property it must also close ``additionalProperties`` (a tool with no parameters).
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return False
    return bool(properties) or schema.get("additionalProperties") is False


def is_flat_object_schema(schema: Any) -> bool:
    """Whether ``schema`` constrains an arguments object only property by property.

    For such a schema, adding or removing optional properties that it does not
    mention cannot change whether the other properties are valid; the apply site
    then lets an inner layer skip re-validation (:meth:`Tool.run_validated`).
    """
    return (
        isinstance(schema, dict)
        and schema.get("type") == "object"
        and set(schema) <= _FLAT_KEYS
        and isinstance(schema.get("properties", {}), dict)
    )
