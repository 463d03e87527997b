"""Canonical JSON (RFC 8785, JCS), digests and content ids.

* :func:`canonical_json` returns the RFC 8785 bytes of a JSON value: UTF-8, no
  insignificant whitespace, object members sorted by their UTF-16 code units,
  numbers in the ECMAScript ``Number.prototype.toString`` form (RFC 8785 §3.2.2.3),
  strings escaped as ``JSON.stringify`` does (§3.2.2.2).
* :func:`digest` writes a SHA-256 digest in the OCI form ``sha256:<64 hex>``.
* :func:`content_id` is ``<kind>_<hex>``: the digest of the canonical JSON of a
  value, prefixed by what kind of thing it identifies.

Anything that has no JSON form is refused with :class:`CanonicalizationError`
naming where in the value it sits (``$.steps[2].args``): NaN and infinities,
non-string keys, bytes, sets, tuples' look-alikes of other types, lone surrogates,
containers nested deeper than :data:`MAX_DEPTH`, and integers of more than
:data:`MAX_INTEGER_DIGITS` digits.

One extension of RFC 8785: an ``int`` outside the IEEE 754 exact range
(``|i| > 2**53 - 1``) is written as its exact decimal digits (``9223372036854775807``),
not rounded to the nearest double as RFC 8785 §3.2.2.3 would (which makes
``2**63 - 1`` and ``2**63`` the same bytes). Real tool schemas declare int64 bounds
(``"maximum": 9223372036854775807``) and ids; their bytes, fingerprints and digests stay
exact and distinct, and a float stays a float (``2.0**63`` is ``9223372036854776000``,
the ECMAScript form). Inside the exact range the bytes are RFC 8785's.

The encoder is pure Python (:func:`canonical_json`); the tests compare it with the
``rfc8785`` package. Hashing is ``hashlib``'s SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

from toolproof.errors import CanonicalizationError

__all__ = [
    "MAX_DEPTH",
    "MAX_INTEGER_DIGITS",
    "MAX_SAFE_INTEGER",
    "canonical_json",
    "content_id",
    "digest",
    "digest_json",
    "digest_of_hex",
    "hash_digest",
    "is_digest",
    "parse_digest",
]

MAX_DEPTH = 256
"""How deeply arrays and objects may nest (the top-level value is depth 0); deeper is refused."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer an IEEE 754 double holds exactly (ECMAScript ``Number.MAX_SAFE_INTEGER``);
past it an ``int`` is written as its exact digits (see the module docstring)."""

MAX_INTEGER_DIGITS = 4300
"""The most decimal digits an integer may have (Python's own limit on ``int`` to ``str``)."""

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_encode_string: Callable[[str], str] = json.encoder.encode_basestring  # C when available


class _Refusal(Exception):
    """A value the encoder refuses, with the rule it broke but no path (see :func:`_locate`)."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"


def _format_float(value: float) -> str:
    """ECMAScript Number::toString for a finite double (RFC 8785 §3.2.2.3)."""
    if value != value or value in (math.inf, -math.inf):
        raise _Refusal(f"{value!r} is not a JSON number (NaN and Infinity are refused)")
    if value == 0.0:
        return "0"
    if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        # exact below 2**53, where the shortest round-trip digits are the integer's own;
        # larger integral doubles (2.0**60) print their shortest digits padded with zeros
        return str(int(value))
    sign = "-" if value < 0 else ""
    text = repr(abs(value))
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * (-point) + digits
    else:
        exponent = point - 1
        head = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{head}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    return sign + body


def _big_integer(value: int) -> str:
    """The exact decimal digits of an ``int`` (outside the double range too)."""
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return str(value)
    if value.bit_length() > 14_286:  # more than 4300 digits for sure (log2(10) * 4300)
        raise _Refusal(f"integer of more than {MAX_INTEGER_DIGITS} digits")
    try:
        return str(value)
    except ValueError:  # past sys.get_int_max_str_digits()
        raise _Refusal(f"integer of more than {MAX_INTEGER_DIGITS} digits") from None


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(value: dict[Any, Any]) -> list[str]:
    """An object's keys in RFC 8785 order (by UTF-16 code units); a non-``str`` key is refused."""
    keys = list(value)
    ascii_only = True
    for key in keys:
        if type(key) is not str:
            raise _Refusal(f"object key {key!r} is {type(key).__name__}, not str")
        if ascii_only and not key.isascii():
            ascii_only = False
    keys.sort(key=None if ascii_only else _utf16_key)
    return keys


def _child_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


_MEMBERS: dict[str, str] = {}
"""``,"<key>":`` by object key: the text before a member's value, for up to
:data:`_MEMBERS_MAX` keys of at most 64 characters (the field names of contract models and
trace events, seen once per event; a key is encoded the same way whether cached or not)."""
_MEMBERS_MAX = 4096


def _member(key: str) -> str:
    """``,"<key>":`` for a ``str`` key, remembered in :data:`_MEMBERS` while there is room."""
    text = "," + _encode_string(key) + ":"
    if len(key) <= 64 and len(_MEMBERS) < _MEMBERS_MAX:
        _MEMBERS[key] = text
    return text


def _encode_dict(value: dict[Any, Any], out: list[str], depth: int) -> None:
    if not value:
        out.append("{}")
        return
    keys = list(value)
    try:
        keys.sort()  # by code point: the UTF-16 order whenever every key is ASCII
        ascii_keys = "".join(keys).isascii()
    except Exception:  # only a key that is not a str sorts or joins with an error
        raise _Refusal("an object key is not a str") from None  # _locate names it
    if not ascii_keys:
        keys.sort(key=_utf16_key)
    members = _MEMBERS
    start = len(out)
    for key in keys:
        if type(key) is not str:  # a str subclass (StrEnum) sorts and joins as a str does
            raise _Refusal(f"object key {key!r} is {type(key).__name__}, not str")
        out.append(members.get(key) or _member(key))
        item = value[key]
        item_kind = type(item)
        if item_kind is str:
            out.append(_encode_string(item))
        elif item_kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            out.append(str(item))
        else:
            _encode(item, out, depth + 1)
    out[start] = "{" + out[start][1:]  # the first member has no comma before it
    out.append("}")


def _encode_list(value: list[Any], out: list[str], depth: int) -> None:
    if not value:
        out.append("[]")
        return
    out.append("[")
    for index, item in enumerate(value):
        if index:
            out.append(",")
        if type(item) is str:
            out.append(_encode_string(item))
        else:
            _encode(item, out, depth + 1)
    out.append("]")


def _encode(value: Any, out: list[str], depth: int) -> None:
    """Append the canonical text of ``value`` (at nesting ``depth``) to ``out``.

    Raises:
        _Refusal: ``value`` has no JSON form; it carries the rule, not the path, which
            :func:`_locate` finds only then (so no path is built for a value that encodes).

    """
    kind = type(value)
    if kind is str:
        out.append(_encode_string(value))
    elif kind is dict:
        if depth >= MAX_DEPTH:
            raise _Refusal(_TOO_DEEP)
        _encode_dict(value, out, depth)
    elif kind is list:
        if depth >= MAX_DEPTH:
            raise _Refusal(_TOO_DEEP)
        _encode_list(value, out, depth)
    elif kind is int:
        out.append(_big_integer(value))
    elif kind is bool:
        out.append("true" if value else "false")
    elif value is None:
        out.append("null")
    elif kind is float:
        out.append(_format_float(value))
    elif kind is tuple:
        raise _Refusal("tuple is not a JSON value (use a list)")
    else:
        raise _Refusal(f"{kind.__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 (JCS) canonical JSON bytes of a JSON value.

    Args:
        value: plain JSON: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``
            (beyond ``|i| <= 2**53 - 1`` as exact digits, up to
            :data:`MAX_INTEGER_DIGITS`), finite ``float``, ``bool`` or ``None``,
            nested at most :data:`MAX_DEPTH` deep.
            Subclasses of these (e.g. ``StrEnum`` members) are refused: convert first.

    Returns:
        The canonical UTF-8 bytes.

    Raises:
        CanonicalizationError: a value with no JSON form; ``path`` says where it sits
            (the first such item in the canonical order of the output).

    """
    out: list[str] = []
    try:
        _encode(value, out, 0)
    except _Refusal as refusal:
        _locate(value, "$", 0)
        raise CanonicalizationError("$", refusal.rule) from None  # pragma: no cover
    text = "".join(out)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _find_surrogate(value, "$")
        raise  # pragma: no cover - _find_surrogate always raises first


def _locate(value: Any, path: str, depth: int) -> None:
    """Walk a refused value as :func:`_encode` does, naming paths; raise at the first refusal.

    The encoder builds no path; this second walk runs only once it has refused, and
    applies the encoder's own checks item by item in the same order, so the error names
    the item the encoder stopped at.

    Raises:
        CanonicalizationError: the first item with no JSON form, at its path.

    """
    kind = type(value)
    try:
        if kind is dict or kind is list:
            if depth >= MAX_DEPTH:
                raise _Refusal(_TOO_DEEP)
            children = (
                [(_child_path(path, key), value[key]) for key in _sorted_keys(value)]
                if kind is dict
                else [(_child_path(path, index), item) for index, item in enumerate(value)]
            )
        else:
            _encode(value, [], depth)
            return
    except _Refusal as refusal:
        raise CanonicalizationError(path, refusal.rule) from None
    for child_path, child in children:
        _locate(child, child_path, depth + 1)


def _find_surrogate(value: Any, path: str, what: str = "string") -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CanonicalizationError(
                path, f"{what} holds a lone surrogate at offset {exc.start} (not valid Unicode)"
            ) from None
    elif isinstance(value, dict):
        for key, item in sorted(value.items(), key=lambda pair: _utf16_key(pair[0])):
            _find_surrogate(key, path, f"object key {key!r}")
            _find_surrogate(item, _child_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find_surrogate(item, _child_path(path, index))


def digest(data: bytes) -> str:
    """Return the SHA-256 digest of ``data`` as ``sha256:<64 lowercase hex>`` (the OCI form)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of_hex(hex_digest: str) -> str:
    """``sha256:<hex>`` of an already computed SHA-256 hex (an id's or a file name's hex part).

    The hex is not checked (a file name may be anything); check the result with
    :func:`is_digest` where that matters.
    """
    return "sha256:" + hex_digest


def hash_digest(sha: Any) -> str:
    """``sha256:<hex>`` of a running ``hashlib.sha256()`` object (for streamed data)."""
    return "sha256:" + str(sha.hexdigest())


def digest_json(value: Any) -> str:
    """Return :func:`digest` of :func:`canonical_json` of ``value``.

    Raises:
        CanonicalizationError: as :func:`canonical_json`.

    """
    return digest(canonical_json(value))


def content_id(kind: str, value: Any) -> str:
    """Return the content id ``<kind>_<hex>`` of a JSON value.

    Args:
        kind: a short lowercase word naming what is identified (``call``, ``plan``).
        value: the content, without its own id field.

    Raises:
        CanonicalizationError: as :func:`canonical_json`.

    """
    data = canonical_json(value)
    return f"{kind}_{hashlib.sha256(data).hexdigest()}"


def is_digest(text: object) -> bool:
    """Whether ``text`` is a well-formed ``sha256:<64 lowercase hex>`` digest."""
    return isinstance(text, str) and _DIGEST_RE.match(text) is not None


def parse_digest(text: str) -> str:
    """Return the hex part of a ``sha256:<hex>`` digest.

    Raises:
        ValueError: ``text`` is not a well-formed digest.

    """
    if not is_digest(text):
        raise ValueError(f"not a sha256 digest: {text!r} (expected 'sha256:' + 64 lowercase hex)")
    return text[7:]
