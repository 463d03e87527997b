"""JSON Schema helpers: compiled validators, argument errors, plain-JSON checks.

Validation follows JSON Schema draft 2020-12 with ``format`` as an annotation
(the 2020-12 default): no coercion, ``"5"`` is not an integer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs

from toolproof.identity import MAX_DEPTH

__all__ = [
    "MAP_KEYWORDS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_REGEX_BACKTRACK",
    "SUBSCHEMA_KEYWORDS",
    "SUBSCHEMA_LIST_KEYWORDS",
    "ArgumentError",
    "Validator",
    "compile_validator",
    "count_values",
    "is_plain_json",
    "json_problem",
    "strip_titles",
    "validation_errors",
]

MAX_ARGUMENT_DEPTH = MAX_DEPTH
"""How deeply arrays and objects may nest in a call's arguments or result (the
top-level value is depth 0): the depth canonical JSON accepts. Deeper values are
refused before the validator sees them (its recursion would overflow the stack)."""

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
    return jsonschema_rs.validator_for(
        schema,
        validate_formats=False,
        retriever=_refuse_retrieval,
        pattern_options=_PATTERNS,
    )


MAX_REGEX_BACKTRACK = 10_000
"""Backtracking steps one ``pattern`` match may take (``patternProperties`` too).

jsonschema-rs matches a pattern with the linear-time ``regex`` crate, and one with
look-around or a back-reference with ``fancy-regex``, which backtracks: ``^(a|a)*\\1$``
against 5,000 ``a`` takes 0.12 s per match at its default limit of 1,000,000 steps. A
match that needs more steps than this counts as not matching, so the value is refused."""

_PATTERNS = jsonschema_rs.FancyRegexOptions(backtrack_limit=MAX_REGEX_BACKTRACK)


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
    """Whether ``value`` is plain JSON (see :func:`json_problem`).

    jsonschema-rs validates a ``Decimal`` as a number and a tuple as an array, so a
    call's arguments are checked for plain JSON as well: a body receives JSON only.
    """
    return json_problem(value) is None


def json_problem(value: Any, path: str = "$") -> str | None:
    """Describe the first item of ``value`` that is not plain JSON, or return ``None``.

    Plain JSON is ``dict`` (``str`` keys), ``list``, ``str``, ``int``, finite
    ``float``, ``bool`` and ``None`` exactly (no subclasses, no tuples), every string
    and key with an exact UTF-8 form (no lone surrogate: RFC 8259 section 8.1, RFC 8785
    section 3.2.2.2; what ``os.listdir`` gives for a Latin-1 file name), with arrays
    and objects nested at most :data:`MAX_ARGUMENT_DEPTH` deep (the top-level value is
    depth 0, as in :func:`toolproof.identity.canonical_json`). The walk is iterative
    and linear in the size of ``value``; it stops at the first container past the depth
    limit, so a value nested a million deep costs no more than one 257 deep.

    Args:
        value: the value to check.
        path: how the top-level value is named in the description (``$``).

    Returns:
        ``"<path>: <what is wrong>"`` (``$.a[2]: tuple is not a JSON value``), or ``None``.

    """
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    while stack:
        item, where, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth >= MAX_ARGUMENT_DEPTH:
                return (
                    f"{_where(path, where)}: nested deeper than {MAX_ARGUMENT_DEPTH} levels "
                    "(rule: MAX_ARGUMENT_DEPTH, arrays and objects in arrays and objects)"
                )
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return (
                            f"{_where(path, where)}: key {key!r} is {type(key).__name__}, not str"
                        )
                    if not key.isascii() and (problem := utf8_problem(key)) is not None:
                        return f"{_where(path, where)}: key {problem}"
                    child_kind = type(child)
                    if (
                        child_kind is int
                        or child_kind is bool
                        or child is None
                        or (child_kind is str and child.isascii())
                    ):
                        continue  # plain JSON as it is: nothing to walk
                    stack.append((child, (where, key), depth + 1))
            else:
                stack.extend((child, (where, index), depth + 1) for index, child in enumerate(item))
        elif kind is float:
            if not math.isfinite(item):
                return f"{_where(path, where)}: {item!r} is not a JSON number"
        elif kind is str:
            if not item.isascii() and (problem := utf8_problem(item)) is not None:
                return f"{_where(path, where)}: {problem}"
        elif kind not in _SCALARS and item is not None:
            return (
                f"{_where(path, where)}: {kind.__module__}.{kind.__qualname__} is not a JSON value"
            )
    return None


_SCALARS = (str, int, bool)


def utf8_problem(text: str) -> str | None:
    r"""Describe the first lone surrogate of ``text``, or return ``None`` when it has none.

    A ``str`` holding a lone surrogate (``"\\udce9"``, what Python's ``surrogateescape``
    makes of a byte that is not UTF-8) has no UTF-8 form, so it is no JSON string
    (RFC 8259 section 8.1).

    Returns:
        ``"string has a lone surrogate U+DCE9 at index 3 (no UTF-8 form: RFC 8259 8.1)"``,
        or ``None``.

    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"string has a lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start} "
            "(no UTF-8 form: RFC 8259 8.1)"
        )
    return None


def _where(path: str, where: Any) -> str:
    """``$.a[2]`` from a linked path (``(parent, key)`` pairs, ``None`` at the top)."""
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if type(key) is int else f".{key}")
    parts.reverse()
    if len(parts) > 12:  # a path hundreds of levels deep: its ends say where
        parts[6:-6] = [f"...({len(parts) - 12} levels)..."]
    return path + "".join(parts)


def count_values(value: Any) -> int:
    """The JSON values in ``value``, itself included (``{"a": [1, 2]}`` holds 4).

    Iterative; call it on plain JSON (see :func:`json_problem`), whose depth is bounded.
    """
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return count


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
