"""Limits on a declared JSON Schema, and the checked deep copy that binding keeps.

A declaration is untrusted input (DESIGN.md section 9): before anything compiles
it, :func:`prepare_schema` refuses, with an error naming the tool, the field and
the limit, a schema that is

* not plain JSON (canonical form, :func:`toolproof.identity.canonical_json`: no
  NaN, no non-string keys, no tuples; integers past 2**53 - 1 are exact digits),
* larger than :data:`MAX_SCHEMA_BYTES` bytes of canonical JSON,
* nested deeper than :data:`MAX_SCHEMA_DEPTH` JSON levels,
* of an unknown ``$schema`` dialect, or with a remote or unresolvable ``$ref``,
* larger than :data:`MAX_REF_EXPANSION` subschemas once its references are
  expanded (the exponential "billion laughs" shape), counted exactly in linear
  time, a recursive target once (see :mod:`toolproof.schema.expansion`).

Every check is linear in the schema size or capped by a limit, so a schema bomb
is refused in milliseconds. Override the limits per call with :class:`SchemaLimits`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproof.errors import CanonicalizationError, ToolBindError
from toolproof.identity import canonical_json
from toolproof.schema.expansion import expansion_size, path_expansion
from toolproof.schema.fanout import applications_per_value
from toolproof.schema.refs import RefWalker, dialect_of, field_path
from toolproof.schema.validation import MAX_ARGUMENT_DEPTH

__all__ = [
    "DEFAULT_LIMITS",
    "INLINE_FANOUT",
    "MAX_REF_EXPANSION",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "PreparedSchema",
    "SchemaLimits",
    "measure_fanout",
    "needs_isolation",
    "prepare_schema",
]

MAX_SCHEMA_BYTES = 1_048_576
"""Default limit on a schema's size: bytes of its RFC 8785 canonical JSON (1 MiB)."""

MAX_SCHEMA_DEPTH = 64
"""Default limit on a schema's nesting: JSON levels (objects and arrays) from the root,
the root object being level 1. A nested object property costs two levels
(``properties`` and the property), an array item one (``items``)."""

INLINE_FANOUT = 64
"""A schema whose plain count of subschemas (or reference expansion) is at most this
is not measured further: no value can have more applied to it. Past it the exact
per-value bound is computed, and calls of a tool whose bound is still past it count
their values before validating (see :data:`toolproof.tools.tool.MAX_VALIDATION_WORK`)."""

MAX_REF_EXPANSION = 10_000
"""Default limit on the subschemas a schema expands to once every ``$ref`` to a
non-recursive target is inlined (a recursive target counts once): the work a validator
compiler may have to do."""

_REF_MARKERS = (b'"$ref"', b'"$dynamicRef"', b'"$recursiveRef"')
_ANCHOR_MARKERS = (b'"$anchor"', b'"$dynamicAnchor"', b'"$recursiveAnchor"')


@dataclass(frozen=True)
class SchemaLimits:
    """Bounds on one declared schema; every value must be a positive integer.

    Attributes:
        max_bytes: size of the canonical JSON, in bytes (default :data:`MAX_SCHEMA_BYTES`).
        max_depth: nesting, in JSON levels (default :data:`MAX_SCHEMA_DEPTH`).
        max_expansion: subschemas after reference expansion (default :data:`MAX_REF_EXPANSION`).

    Raises:
        ValueError: a limit is not a positive integer.

    """

    max_bytes: int = MAX_SCHEMA_BYTES
    max_depth: int = MAX_SCHEMA_DEPTH
    max_expansion: int = MAX_REF_EXPANSION

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_expansion"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"SchemaLimits.{name} must be a positive integer, not {value!r}")


DEFAULT_LIMITS = SchemaLimits()
"""The limits :func:`toolproof.bind_contribution` applies when given none."""


@dataclass(frozen=True)
class PreparedSchema:
    """A checked, private deep copy of a declared schema.

    Attributes:
        schema: the copy (plain ``dict``/``list``/scalars, declaration order kept).
        draft: the draft it declares (2020 for 2020-12, 2019, 7, 6 or 4).
        size: its canonical JSON size in bytes.
        fanout: an upper bound of the subschemas a validator applies to one JSON value
            of an instance (references and recursion included); the work of validating
            a call is at most ``fanout`` times the values in its arguments.

    """

    schema: dict[str, Any]
    draft: int
    size: int
    fanout: int = 1


def _too_deep(value: Any, limit: int) -> bool:
    level: list[Any] = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                kind = type(child)
                if kind is dict or kind is list:
                    below.append(child)
        level = below
        depth += 1
    return False


def _depth_error(tool: str, field: str, limit: int) -> ToolBindError:
    return ToolBindError(
        tool,
        field,
        f"nesting depth exceeds the limit of {limit} levels (rule: SchemaLimits.max_depth, "
        "default MAX_SCHEMA_DEPTH; a schema this deep is refused before it is compiled)",
    )


def prepare_schema(
    tool: str, field: str, schema: Any, limits: SchemaLimits = DEFAULT_LIMITS
) -> PreparedSchema:
    """Check a declared schema against ``limits`` and return a private deep copy.

    Args:
        tool: the tool's name, for errors.
        field: the field holding the schema (``input_schema``, ``output_schema``).
        schema: the declared schema: a JSON object (any ``Mapping`` at the top), or a
            boolean schema (``true`` is held as ``{}``, ``false`` as ``{"not": {}}``).
        limits: the bounds to apply.

    Returns:
        The :class:`PreparedSchema`; the caller's object is never modified.

    Raises:
        ToolBindError: the schema is not a plain JSON object, breaks a limit, declares
            an unknown dialect, or has a remote or unresolvable reference; ``field``
            names where (``input_schema.properties.a.$ref``).

    """
    if isinstance(schema, Mapping) and type(schema) is not dict:
        schema = dict(schema)
    elif schema is True or schema is False:  # boolean schemas, as objects (2020-12 §4.3.2)
        schema = {} if schema else {"not": {}}
    if type(schema) is not dict:
        raise ToolBindError(
            tool,
            field,
            f"must be a JSON Schema object (a JSON object), not {type(schema).__name__}",
        )
    try:
        data = canonical_json(schema)
    except CanonicalizationError as exc:
        rule = str(exc.fields["rule"])
        if "nested deeper" in rule:  # the C encoder's own nesting guard
            raise _depth_error(tool, field, limits.max_depth) from None
        where = str(exc.fields["path"])[1:]
        raise ToolBindError(tool, field + where, f"is not plain JSON: {rule}") from exc
    except RecursionError:
        raise _depth_error(tool, field, limits.max_depth) from None
    if len(data) > limits.max_bytes:
        raise ToolBindError(
            tool,
            field,
            f"schema size {len(data)} bytes exceeds the limit of {limits.max_bytes} bytes "
            "(rule: SchemaLimits.max_bytes, default MAX_SCHEMA_BYTES, counted on canonical JSON)",
        )
    if _too_deep(schema, limits.max_depth):
        raise _depth_error(tool, field, limits.max_depth)
    # canonical_json proved it plain JSON, so this round trip is an exact deep copy
    # that keeps declaration order and number forms (1.0 stays a float)
    copy: dict[str, Any] = json.loads(json.dumps(schema, ensure_ascii=False))
    draft = dialect_of(copy, tool=tool, field=field)
    fanout = measure_fanout(tool, field, copy, data, draft, limits)
    return PreparedSchema(copy, draft, len(data), fanout)


def measure_fanout(
    tool: str,
    field: str,
    schema: dict[str, Any],
    data: bytes,
    draft: int,
    limits: SchemaLimits = DEFAULT_LIMITS,
) -> int:
    """Bound the subschemas a validator of ``schema`` applies to one JSON value.

    Args:
        tool: the tool's name, for errors.
        field: the field holding the schema, for errors.
        schema: the schema (plain JSON, within ``limits.max_depth``).
        data: its canonical JSON (:func:`~toolproof.identity.canonical_json`).
        draft: its dialect (:func:`~toolproof.schema.refs.dialect_of`).
        limits: the bounds to apply (``max_expansion``).

    Returns:
        The bound (at least 1): the subschemas of a schema without references, the
        expansion of a non-recursive one, and for a recursive one the most that can
        apply together at one location of arguments up to ``MAX_ARGUMENT_DEPTH`` deep
        (:func:`~toolproof.schema.fanout.applications_per_value`).

    Raises:
        ToolBindError: a remote, unresolvable or non-unique reference target, a cycle
            of in-place references, or a bound over ``limits.max_expansion``.

    """
    if any(marker in data for marker in _REF_MARKERS):
        walker = RefWalker(schema, tool=tool, field=field, draft=draft)
        id_markers = (b'"id"',) if draft == 4 else (b'"$id"',)
        if any(marker in data for marker in (*id_markers, *_ANCHOR_MARKERS)):
            walker.index()
        else:  # no $id or anchor anywhere: the root is the only resource
            walker.has_ids = False
        expansion = None
        fanout = path_expansion(walker, limits.max_expansion)
        if fanout is None:  # the bound is too high
            expansion = expansion_size(walker, limits.max_expansion)
            fanout = expansion.size
        if expansion is not None and expansion.size > limits.max_expansion:
            raise ToolBindError(
                tool,
                field_path(field, expansion.worst or ()),
                f"reference expansion exceeds the limit of {limits.max_expansion} subschemas "
                "(rule: SchemaLimits.max_expansion, default MAX_REF_EXPANSION; a $ref to a "
                "non-recursive target counts as the subschemas it expands to, so exponential "
                "fan-out is refused)",
            )
    else:
        walker = None
        fanout = data.count(b"{")  # no reference: at most every object is applied once
    dynamic = b'"$dynamicRef"' in data or b'"$recursiveRef"' in data
    if fanout > INLINE_FANOUT or dynamic or (walker is not None and walker.recursive):
        # recursion may reach one definition along several paths at once (a dynamic
        # reference may reach any dynamic anchor in scope); and a large
        # schema's count of every subschema says little about one value: measure
        if walker is None:
            walker = RefWalker(schema, tool=tool, field=field, draft=draft)
            walker.has_ids = False
        fanout = applications_per_value(
            walker,
            limit=limits.max_expansion,
            max_depth=MAX_ARGUMENT_DEPTH,
            tool=tool,
            field=field,
        )
        if fanout > limits.max_expansion:
            raise ToolBindError(
                tool,
                field,
                f"validating one value of the arguments could apply more than "
                f"{limits.max_expansion} subschemas (rule: SchemaLimits.max_expansion, "
                "default MAX_REF_EXPANSION, also bounds the subschemas applied to one "
                "value; recursive references that reach a definition along several "
                "paths multiply with the depth of the arguments)",
            )
    return max(fanout, 1)


_ISOLATION_MARKERS = (
    b'"$id"',
    b'"$anchor"',
    b'"$dynamicAnchor"',
    b'"$recursiveAnchor"',
    b'"$dynamicRef"',
    b'"$recursiveRef"',
)


def needs_isolation(data: bytes, fanout: int) -> bool:
    """Whether a schema validates in a bounded worker (:mod:`toolproof.schema.isolation`).

    A schema is validated in the caller's process only when the walker's count is exact
    by construction: every reference a JSON Pointer into the one resource, and at most
    :data:`INLINE_FANOUT` subschemas applied to one value. Any embedded resource or
    anchor (``$id``, draft-04 ``id``, ``$anchor``, ``$dynamicAnchor``,
    ``$recursiveAnchor``), any dynamic reference (``$dynamicRef``, ``$recursiveRef``),
    or a larger fanout sends it to the worker, whose deadline and memory cap hold however
    the schema is built.

    Args:
        data: the schema's canonical JSON (:func:`~toolproof.identity.canonical_json`).
        fanout: its bound of subschemas per value (:func:`measure_fanout`).

    Returns:
        True for a schema to validate in the worker pool.

    """
    if fanout > INLINE_FANOUT or any(marker in data for marker in _ISOLATION_MARKERS):
        return True
    return b'"id"' in data and b"draft-04" in data
