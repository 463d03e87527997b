"""Trace lines spliced from precompiled fragments: an event's canonical JSON without a model.

RFC 8785 sorts an object's members, so the canonical JSON of every event of one class
that is given the same fields is the same fixed fragments with the given fields'
encodings in between: ``{"call_id":…,"idx":…,"prev":…,"schema_version":1,"step":…,
"type":"tool_called"}``. A :class:`LineShape` is that line compiled once, from the
event model's own fields and defaults, into a bytes format with one named slot per
given field (``%(call_id)b``); filling it costs one ``%`` instead of a dict copy and a
whole canonical encoding. Every field value is encoded by the C encoder of
:mod:`toolproof.identity` (the exact one deciding what it declines), so a line is
byte for byte what ``canonical_json(cls(**fields).to_json())`` writes; a test holds
every event kind to it, and a property test holds random field values.
"""

from __future__ import annotations

from typing import Any

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.trace import EventBase
from toolproof.identity import canonical_json, plain_json_encoder

__all__ = ["LineShape", "encode_field", "line_shape", "prev_json"]

_encode = plain_json_encoder()
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Field values encoded as they are; anything else is a model, encoded as ``to_json()``."""
_CHAINED = ("idx", "prev")
"""The slots every shape has: filled from the writer's position, never given."""
_FIXED = frozenset({*_CHAINED, "type", "schema_version"})


def encode_field(value: Any) -> bytes:
    """The canonical JSON of one event field's value (a model as its ``to_json()``).

    Raises:
        CanonicalizationError: the value has no canonical JSON form.

    """
    if type(value) not in _PLAIN:
        value = value.to_json()
    return _encode(value) or canonical_json(value)


def prev_json(prev: str | None) -> bytes:
    """The ``prev`` slot: ``null`` or the quoted ``sha256:<hex>`` (never needs escaping)."""
    return b"null" if prev is None else b'"' + prev.encode("ascii") + b'"'


class LineShape:
    """The canonical JSON line of event class ``cls`` given ``given`` fields, compiled.

    Fields of the model that are neither given nor in ``constants`` are written with
    their defaults; ``schema_version`` and ``type`` are fixed.

    Args:
        cls: the event class.
        given: the fields filled per line (besides ``idx`` and ``prev``), each as its
            canonical JSON bytes.
        constants: fields with one value for every line of the shape (plain JSON).

    Attributes:
        fmt: the line as a bytes format: fixed fragments and ``%(name)b`` slots (a
            bytes format's mapping is keyed by bytes: ``{b"step": b'"s"'}``).
        keys: the slot keys of ``given``, in order (``b"step"``...).

    Raises:
        TypeError: a field is unknown to ``cls``, or a required one is missing.

    """

    def __init__(
        self,
        cls: type[EventBase],
        given: tuple[str, ...],
        constants: dict[str, Any] | None = None,
    ) -> None:
        constants = dict(constants or {})
        fields = cls.model_fields
        unknown = sorted((set(given) | set(constants)) - set(fields))
        if unknown or _FIXED.intersection(given):
            raise TypeError(f"{cls.__name__}: not fields to give: {unknown or sorted(given)}")
        parts: list[bytes] = []
        for name in sorted(fields):  # field names are ASCII: code-unit order is str order
            key = canonical_json(name).replace(b"%", b"%%") + b":"
            if name in given or name in _CHAINED:
                parts.append(key + b"%(" + name.encode("ascii") + b")b")
                continue
            info = fields[name]
            if name == "type":
                value: Any = info.default
            elif name == "schema_version":
                value = SCHEMA_VERSION
            elif name in constants:
                value = constants[name]
            elif info.is_required():
                raise TypeError(f"{cls.__name__}: field {name!r} is required")
            else:
                value = info.get_default(call_default_factory=True)
            parts.append(key + encode_field(value).replace(b"%", b"%%"))
        self.cls = cls
        self.given = given
        self.keys = tuple(name.encode("ascii") for name in given)
        self.fmt = b"{" + b",".join(parts) + b"}"

    def line(self, slots: dict[bytes, bytes]) -> bytes:
        """The line: ``fmt`` filled with ``slots`` (``b"idx"``, ``b"prev"``, every given field).

        Raises:
            KeyError: a slot is missing.

        """
        return self.fmt % slots


_SHAPES: dict[tuple[type[EventBase], tuple[str, ...]], LineShape] = {}


def line_shape(cls: type[EventBase], given: tuple[str, ...]) -> LineShape:
    """The :class:`LineShape` of ``cls`` given ``given`` (compiled once, then cached).

    Raises:
        TypeError: as :class:`LineShape`.

    """
    key = (cls, given)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _SHAPES[key] = LineShape(cls, given)
    return shape
