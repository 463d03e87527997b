"""Where a JSON Pointer into a call's arguments leads in the tool's input schema.

An approval rule points into the arguments (RFC 6901); to evaluate it on the
arguments the body will see, the walker finds, for each prefix of the pointer, the
subschemas that describe the value there and the ``default`` they state
(:func:`pointer_defaults`), and whether the schema declares the location at all
(:func:`undeclared_part`). Only what a schema states locally is followed: a ``$ref``
to a fragment of the same document (``#/$defs/Options``), and the branches of
``allOf``, ``anyOf`` and ``oneOf``; any other reference is not followed (the walk
treats that spot as undescribed). Object members come from ``properties``, array
items from ``prefixItems`` (by index) or ``items``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["IMPLIED_OBJECT", "pointer_defaults", "pointer_parts", "undeclared_part"]

MAX_BRANCHES = 64
"""The most subschemas one location is described by before the walk stops looking."""

IMPLIED_OBJECT: dict[str, Any] = {}
"""What an omitted object whose schema declares properties but no ``default`` is taken
as: ``{}``, so the defaults of its members still apply (a pydantic
``Field(default_factory=Options)`` states no default, yet the body runs with one)."""


def pointer_parts(pointer: str) -> list[str]:
    """The unescaped tokens of ``pointer`` (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``)."""
    return [raw.replace("~1", "/").replace("~0", "~") for raw in pointer.split("/")[1:]]


def _is_index(part: str) -> bool:
    return part.isascii() and part.isdigit() and (part == "0" or part[0] != "0")


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    node: Any = root
    for part in pointer_parts(unquote(ref[1:])) if ref != "#" else []:
        if isinstance(node, Mapping):
            node = node.get(part)
        elif isinstance(node, list) and _is_index(part) and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _branches(schemas: list[Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``schemas`` and what they stand for: local ``$ref``, ``allOf``/``anyOf``/``oneOf``."""
    out: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    queue = list(schemas)
    while queue and len(out) < MAX_BRANCHES:
        schema = queue.pop(0)
        if not isinstance(schema, Mapping) or id(schema) in seen:
            continue
        seen.add(id(schema))
        out.append(schema)
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            queue.append(_resolve(root, ref))
        for key in ("allOf", "anyOf", "oneOf"):
            listed = schema.get(key)
            if isinstance(listed, list):
                queue.extend(listed)
    return out


def _children(schemas: list[Mapping[str, Any]], part: str) -> tuple[list[Any], bool]:
    """The subschemas of member/item ``part``, and whether any schema here declares members."""
    found: list[Any] = []
    declares = False
    for schema in schemas:
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            declares = True
            if part in properties:
                found.append(properties[part])
        if _is_index(part):
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list):
                declares = True
                if int(part) < len(prefix):
                    found.append(prefix[int(part)])
                    continue
            items = schema.get("items")
            if isinstance(items, Mapping):
                declares = True
                found.append(items)
    return found, declares


def _walk(pointer: str, input_schema: Mapping[str, Any]) -> Iterator[tuple[int, list[Any], bool]]:
    """Per token of ``pointer``: its index, its subschemas, whether members are declared."""
    schemas = _branches([input_schema], input_schema)
    for index, part in enumerate(pointer_parts(pointer)):
        found, declares = _children(schemas, part)
        yield index, found, declares
        if not found:
            return
        schemas = _branches(found, input_schema)


def pointer_defaults(pointer: str, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The value each prefix of ``pointer`` takes when the arguments omit it.

    Args:
        pointer: a JSON Pointer (RFC 6901) into the arguments.
        input_schema: the tool's input schema (JSON Schema).

    Returns:
        ``{prefix pointer: value}``: the ``default`` the schema states at that prefix
        (the first found, in the order ``$ref`` and the branches are listed), or
        :data:`IMPLIED_OBJECT` for an object prefix short of the last token whose
        schema declares ``properties`` but states no default. Prefixes with neither
        are left out (an omission there resolves nothing).

    """
    out: dict[str, Any] = {}
    raw = pointer.split("/")[1:]
    for index, found, _ in _walk(pointer, input_schema):
        if not found:
            break
        schemas = _branches(found, input_schema)
        prefix = "/" + "/".join(raw[: index + 1])
        stated = next((s["default"] for s in schemas if "default" in s), _NONE)
        if stated is not _NONE:
            out[prefix] = stated
        elif index < len(raw) - 1 and any(
            isinstance(s.get("properties"), Mapping) for s in schemas
        ):
            out[prefix] = IMPLIED_OBJECT
    return out


def undeclared_part(pointer: str, input_schema: Mapping[str, Any]) -> str | None:
    """The first token of ``pointer`` the schema does not declare where it declares members.

    A location whose schema declares ``properties`` (or ``items``/``prefixItems``) but
    not this token lacks it; a location with no declared members (a free-form object,
    an undescribed value) lacks nothing, and the walk stops there.

    Returns:
        The unescaped token, or ``None`` when every token is declared or the walk
        reached an undescribed location.

    """
    parts = pointer_parts(pointer)
    for index, found, declares in _walk(pointer, input_schema):
        if not found:
            return parts[index] if declares else None
    return None


class _NoneType:
    """The sentinel of "no default stated" (``None`` is a default a schema can state)."""


_NONE: Any = _NoneType()
