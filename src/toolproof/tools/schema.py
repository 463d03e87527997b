"""JSON Schema helpers: compiled validators, argument errors, plain-JSON checks.

Validation follows JSON Schema draft 2020-12 with ``format`` as an annotation
(the 2020-12 default): no coercion, ``"5"`` is not an integer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs

_fast_encode: Callable[[object], bytes | None] | None
try:
    from toolproof._jcs import encode as _fast_encode
except ImportError:  # pragma: no cover - no C compiler at install time
    _fast_encode = None

__all__ = [
    "MAP_KEYWORDS",
    "SUBSCHEMA_KEYWORDS",
    "SUBSCHEMA_LIST_KEYWORDS",
    "ArgumentError",
    "Validator",
    "compile_validator",
    "is_plain_json",
    "json_problem",
    "strip_titles",
    "validation_errors",
]

Validator = Any
"""A compiled jsonschema-rs validator (``is_valid(x) -> bool``, ``iter_errors(x)``)."""

SUBSCHEMA_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "additionalItems",
        "contentSchema",
    }
)
"""Keywords whose value is one subschema (draft 2020-12, plus draft-07's additionalItems)."""

SUBSCHEMA_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas (``items`` as a list is draft-07)."""

MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose value maps names to subschemas; the names are data, not keywords."""


class ArgumentError:
    """One reason the arguments were refused.

    Attributes:
        pointer: JSON Pointer (RFC 6901) to the offending value inside the arguments.
        message: what is wrong, from the validator.

    """

    __slots__ = ("message", "pointer")

    def __init__(self, pointer: str, message: str) -> None:
        self.pointer = pointer
        self.message = message

    def describe(self) -> str:
        """``argument 'a/b': <message>``, or the bare message at the root."""
        if not self.pointer:
            return self.message
        return f"argument {self.pointer[1:]!r}: {self.message}"

    def to_json(self) -> dict[str, str]:
        """``{"pointer": ..., "message": ...}``."""
        return {"pointer": self.pointer, "message": self.message}


def compile_validator(schema: Any) -> Validator:
    """Compile a draft 2020-12 validator for ``schema`` (``format`` as annotation only).

    Args:
        schema: a JSON Schema (object or boolean); ``$schema`` selects another draft.

    Nothing is ever fetched: a ``$ref`` or ``$schema`` outside the schema document
    fails to compile instead of reading a file or the network (DESIGN.md section 9).

    Raises:
        ValueError: the schema is not a valid JSON Schema, or a ``$ref`` cannot be
            resolved inside it (message from jsonschema-rs).

    """
    return jsonschema_rs.validator_for(schema, validate_formats=False, retriever=_refuse_retrieval)


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"remote reference {uri!r} is refused: nothing is fetched")


def _escape(part: str | int) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def validation_errors(validator: Validator, instance: Any, limit: int = 8) -> list[ArgumentError]:
    """Return up to ``limit`` errors of ``instance`` against ``validator``, in validator order."""
    errors: list[ArgumentError] = []
    for error in validator.iter_errors(instance):
        pointer = "".join("/" + _escape(part) for part in error.instance_path)
        errors.append(ArgumentError(pointer, error.message))
        if len(errors) >= limit:
            break
    return errors


def is_plain_json(value: Any) -> bool:
    """Whether ``value`` is plain JSON (see :func:`json_problem`); the C encoder's fast check.

    jsonschema-rs validates a ``Decimal`` as a number and a tuple as an array, so a
    call's arguments are checked for plain JSON as well: a body receives JSON only.
    """
    if _fast_encode is not None and _fast_encode(value) is not None:
        return True
    return json_problem(value) is None


def json_problem(value: Any, path: str = "$") -> str | None:
    """Describe the first item of ``value`` that is not plain JSON, or return ``None``.

    Plain JSON is ``dict`` (``str`` keys), ``list``, ``str``, ``int``, finite
    ``float``, ``bool`` and ``None`` exactly (no subclasses, no tuples).
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return f"{where}: key {key!r} is {type(key).__name__}, not str"
                stack.append((child, f"{where}.{key}"))
        elif kind is list:
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
        elif kind is float:
            if not math.isfinite(item):
                return f"{where}: {item!r} is not a JSON number"
        elif kind not in (str, int, bool) and item is not None:
            return f"{where}: {kind.__module__}.{kind.__qualname__} is not a JSON value"
    return None


def _walk_subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in SUBSCHEMA_KEYWORDS:
                stack.append(value)
            elif key in SUBSCHEMA_LIST_KEYWORDS or (key == "items" and isinstance(value, list)):
                stack.extend(value)
            elif key in MAP_KEYWORDS and isinstance(value, dict):
                stack.extend(value.values())


def strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """Remove the ``title`` keyword from every subschema, in place; return ``schema``.

    Property *names* that happen to be ``title`` are kept: only the keyword goes.
    """
    for node in _walk_subschemas(schema):
        node.pop("title", None)
    return schema


def transform_subschemas(schema: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn`` on every subschema of ``schema`` (object schemas only), in place."""
    for node in _walk_subschemas(schema):
        fn(node)
