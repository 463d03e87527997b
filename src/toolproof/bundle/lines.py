"""Trace lines spliced from precompiled fragments: an event's canonical JSON without a model.

RFC 8785 sorts an object's members, so the canonical JSON of every event of one class
that is given the same fields is the same fixed fragments with the given fields'
encodings in between: ``{"call_id":…,"idx":…,"prev":…,"schema_version":1,"step":…,
"type":"tool_called"}``. A :class:`LineShape` is that line compiled once, from the
event model's own fields and defaults, into a bytes format with one named slot per
given field (``%(call_id)b``); filling it costs one ``%`` instead of a dict copy and a
whole canonical encoding. The same line is also compiled into a :attr:`LineShape.code`
for :func:`chain`, which splices and hash-chains a block of lines in one call (in C:
a call step's five lines cost little more than their hashing). Every field value is
encoded by the C encoder of :mod:`toolproof.identity` (the exact one deciding what it
declines), so a line is byte for byte what ``canonical_json(cls(**fields).to_json())``
writes; a test holds every event kind to it, and a property test holds random field
values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.trace import EventBase
from toolproof.identity import (
    canonical_json,
    chain_accelerator,
    plain_json_encoder,
    sha256_hex,
)

__all__ = ["LineShape", "chain", "chain_python", "encode_field", "line_shape", "prev_json"]

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
        code: the line for :func:`chain`: ``(kinds, f0, f1, ..., fn)``, ``kinds`` naming
            each of the ``n`` slots in line order (``b"i"``: ``idx``, ``b"p"``: ``prev``,
            ``b"v"``: the next given value) and ``f0..fn`` the fixed bytes around them.
        order: the given field names in line order (the order of :func:`chain`'s values).
        order_keys: ``order`` as slot keys (``b"call"``...).

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
        fragments, fragment, kinds, order = [], b"{", bytearray(), []
        for index, name in enumerate(sorted(fields)):  # ASCII names: code-unit order
            raw_key = (b"," if index else b"") + canonical_json(name) + b":"
            key = canonical_json(name).replace(b"%", b"%%") + b":"
            if name in given or name in _CHAINED:
                parts.append(key + b"%(" + name.encode("ascii") + b")b")
                fragments.append(fragment + raw_key)
                fragment = b""
                kinds += b"i" if name == "idx" else b"p" if name == "prev" else b"v"
                if name in given:
                    order.append(name)
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
            fragment += raw_key + encode_field(value)
        fragments.append(fragment + b"}")
        self.cls = cls
        self.given = given
        self.keys = tuple(name.encode("ascii") for name in given)
        self.fmt = b"{" + b",".join(parts) + b"}"
        self.code: tuple[bytes, ...] = (bytes(kinds), *fragments)
        self.order = tuple(order)
        self.order_keys = tuple(name.encode("ascii") for name in order)

    def line(self, slots: dict[bytes, bytes]) -> bytes:
        """The line: ``fmt`` filled with ``slots`` (``b"idx"``, ``b"prev"``, every given field).

        Raises:
            KeyError: a slot is missing.

        """
        return self.fmt % slots


def chain_python(prev_json: bytes, idx: int, lines: list[tuple[Any, ...]]) -> tuple[bytes, bytes]:
    r""":func:`chain` in Python (used when the C extension is missing).

    Args:
        prev_json: the first line's ``prev`` slot (``null`` or a quoted digest).
        idx: the first line's ``idx`` (``0 <= idx <= 2**63 - 1 - len(lines)``).
        lines: tuples ``(code, v0, v1, ...)``: a :attr:`LineShape.code` and the canonical
            JSON bytes of the shape's given fields in :attr:`LineShape.order`.

    Returns:
        ``(joined, last)``: every line followed by ``\n``, line ``k`` at ``idx + k`` with
        ``prev`` the quoted ``sha256:<hex>`` of line ``k - 1`` (``prev_json`` for the
        first); and the last line's digest as a ``prev`` slot (``prev_json`` when
        ``lines`` is empty).

    Raises:
        TypeError: an argument, an item, a code, a fragment or a value has the wrong
            type (the message names the item's index).
        ValueError: ``idx`` is out of range, or an item's values do not match its code's
            slots, or a code is malformed.

    """
    if not isinstance(prev_json, bytes):
        raise TypeError("chain: prev_json is not bytes")
    if not isinstance(idx, int) or isinstance(idx, bool):
        raise TypeError("chain: idx is not an int")
    if not isinstance(lines, list):
        raise TypeError("chain: lines is not a list")
    if not 0 <= idx <= _IDX_MAX - len(lines):
        raise ValueError("chain: idx is not in 0 .. 2**63 - 1 - len(lines)")
    for index, item in enumerate(lines):
        _check(index, item)
    out: list[bytes] = []
    for item in lines:
        code = item[0]
        kinds = code[0]
        parts = [code[1]]
        value = 0
        for slot, kind in enumerate(kinds):
            if kind == 0x69:  # b"i"
                parts.append(b"%d" % idx)
            elif kind == 0x70:  # b"p"
                parts.append(prev_json)
            else:
                value += 1
                parts.append(item[value])
            parts.append(code[slot + 2])
        line = b"".join(parts)
        prev_json = b'"sha256:' + sha256_hex(line) + b'"'
        out.append(line)
        out.append(b"\n")
        idx += 1
    return b"".join(out), prev_json


_IDX_MAX = 2**63 - 1


def _check(index: int, item: Any) -> None:
    """Validate ``lines[index]`` of :func:`chain_python` as the C one does, in its order."""

    def fail(kind: type[Exception], message: str) -> Exception:
        return kind(f"chain: lines[{index}]: {message}")

    if not isinstance(item, tuple) or len(item) < 1:
        raise fail(TypeError, "not a tuple (code, value...)")
    code = item[0]
    if not isinstance(code, tuple) or len(code) < 2:
        raise fail(TypeError, "code is not a tuple (kinds, fragment...)")
    kinds = code[0]
    if not isinstance(kinds, bytes):
        raise fail(TypeError, "code's kinds is not bytes")
    if len(code) != len(kinds) + 2:
        raise fail(ValueError, "code does not hold one fragment more than slots")
    values = 0
    for slot in range(len(kinds) + 1):
        if not isinstance(code[slot + 1], bytes):
            raise fail(TypeError, "a fragment of code is not bytes")
        if slot == len(kinds):
            break
        kind = kinds[slot]
        if kind == 0x76:  # b"v"
            values += 1
            if values >= len(item):
                raise fail(ValueError, "fewer values than the code's slots")
            if not isinstance(item[values], bytes):
                raise fail(TypeError, "a value is not bytes")
        elif kind not in (0x69, 0x70):
            raise fail(ValueError, "a slot kind is not b'i', b'p' or b'v'")
    if values + 1 != len(item):
        raise fail(ValueError, "more values than the code's slots")


_c_chain = chain_accelerator()

chain: Callable[[bytes, int, list[tuple[Any, ...]]], tuple[bytes, bytes]] = (
    _c_chain if _c_chain is not None else chain_python
)
"""``chain(prev_json, idx, lines) -> (joined, last)``: :func:`chain_python`, in C.

The C one (:func:`toolproof.identity.chain_accelerator`) when it is built (hashing
with SHA-NI where the CPU has it, else its portable C SHA-256), else
:func:`chain_python`; a property test holds the
two to the same bytes and the same errors."""


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
