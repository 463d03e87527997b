"""The evidence bytes of a tool value, and where a part of the value sits in them.

A tool result's evidence bytes are:

* the raw UTF-8 bytes of the value when the value is a string (media type
  ``text/plain; charset=utf-8``), so a text result can be cited sentence by sentence;
* otherwise the RFC 8785 canonical JSON of the value (``application/json``).

A resource read's evidence is each content item's bytes (:func:`read_contents`).

:func:`locate` finds the byte interval of a nested value inside the canonical JSON
of the whole value without re-parsing: canonical JSON is built from the canonical
JSON of its parts, so offsets add up.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from toolproof.errors import InputError
from toolproof.identity import canonical_json

__all__ = [
    "JSON_MEDIA_TYPE",
    "REF_PREFIX",
    "TEXT_MEDIA_TYPE",
    "encode_value",
    "locate",
    "parse_ref",
    "read_contents",
]

JSON_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"


_BINARY_MEDIA_TYPE = "application/octet-stream"


def read_contents(result: dict[str, Any]) -> list[tuple[bytes, str, dict[str, Any]]]:
    """The evidence of a ``ReadResourceResult``: one ``(bytes, media type, detail)`` per item.

    A text item's bytes are its ``text`` in UTF-8 (media type its ``mimeType``, else
    ``text/plain; charset=utf-8``); a blob item's are its ``blob`` base64-decoded
    (its ``mimeType``, else ``application/octet-stream``). ``detail`` holds the item's
    ``uri`` and ``index`` (from 0).

    Raises:
        InputError: ``contents`` is not a list of objects with a string ``text`` or
            ``blob``, or a blob is not base64 (the message names the item).

    """
    contents = result.get("contents")
    if not isinstance(contents, list):
        raise InputError("a resource read result has no 'contents' list", rule="resource")
    out: list[tuple[bytes, str, dict[str, Any]]] = []
    for index, item in enumerate(contents):
        text = item.get("text") if isinstance(item, dict) else None
        blob = item.get("blob") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(text if blob is None else blob, str):
            raise InputError(
                f"resource contents item {index} holds neither a text nor a blob string",
                rule="resource",
            )
        mime = item.get("mimeType")
        if blob is None:
            data, media = str(text).encode("utf-8"), mime or TEXT_MEDIA_TYPE
        else:
            try:
                data = base64.b64decode(blob, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InputError(
                    f"resource contents item {index} ({item.get('uri')!r}): blob is not "
                    f"base64 ({exc})",
                    rule="resource",
                ) from exc
            media = mime or _BINARY_MEDIA_TYPE
        out.append((data, str(media), {"uri": item.get("uri"), "index": index}))
    return out


def encode_value(value: Any) -> tuple[bytes, str]:
    """Return the evidence bytes of a tool value and their media type.

    Raises:
        CanonicalizationError: the value has no canonical JSON form.

    """
    if type(value) is str:
        return value.encode("utf-8"), TEXT_MEDIA_TYPE
    return canonical_json(value), JSON_MEDIA_TYPE


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _step(value: Any, segment: str) -> tuple[int, Any]:
    """Offset of the child ``segment`` inside the canonical JSON of ``value``, and the child."""
    if type(value) is dict:
        if segment not in value:
            raise KeyError(f"key {segment!r} not found")
        offset = 1
        for key in sorted(value, key=_utf16_key):
            key_bytes = len(canonical_json(key)) + 1
            if key == segment:
                return offset + key_bytes, value[key]
            offset += key_bytes + len(canonical_json(value[key])) + 1
        raise KeyError(segment)  # pragma: no cover - the key is present
    if type(value) is list:
        if not segment.isdigit() or int(segment) >= len(value):
            raise KeyError(f"index {segment!r} is not in a list of {len(value)} items")
        offset = 1
        for item in value[: int(segment)]:
            offset += len(canonical_json(item)) + 1
        return offset, value[int(segment)]
    raise KeyError(f"cannot take {segment!r} of a {type(value).__name__}")


def locate(value: Any, path: Sequence[str]) -> tuple[int, int, Any]:
    """Find the bytes of ``value[path[0]][path[1]]...`` in the evidence bytes of ``value``.

    Args:
        value: the whole tool value (its evidence bytes are :func:`encode_value`).
        path: object keys, or decimal list indices, from the top.

    Returns:
        ``(start, end, part)``: the interval of the part's canonical JSON within the
        evidence bytes, narrowed to the characters between the quotes for a string
        that needs no escaping; and the part itself. An empty ``path`` is the whole
        value (for a string value: its raw UTF-8 bytes).

    Raises:
        KeyError: the path does not exist in the value (the message says which step).

    """
    if type(value) is str:
        if path:
            raise KeyError(f"cannot take {path[0]!r} of a string result")
        return 0, len(value.encode("utf-8")), value
    start = 0
    part = value
    for segment in path:
        offset, part = _step(part, segment)
        start += offset
    length = len(canonical_json(part))
    end = start + length
    if type(part) is str and part and canonical_json(part)[1:-1] == part.encode("utf-8"):
        return start + 1, end - 1, part
    return start, end, part


REF_PREFIX = "steps."


def parse_ref(text: str) -> tuple[str, list[str]]:
    """Parse a step reference ``steps.<step id>.value[.<key or index>]...``.

    Args:
        text: the reference, e.g. ``steps.lookup.value.count`` or
            ``steps.search.value.hits.0.text``.

    Returns:
        The step id and the path inside that step's value.

    Raises:
        InputError: the text is not a step reference (the message shows the syntax).

    """
    parts = text.split(".")
    if len(parts) < 3 or parts[0] != "steps" or parts[2] != "value" or not parts[1]:
        raise InputError(
            f"reference {text!r} is not of the form 'steps.<step id>.value[.<key>|.<index>]...'",
            ref=text,
        )
    if any(not part for part in parts[3:]):
        raise InputError(f"reference {text!r} has an empty segment", ref=text)
    return parts[1], parts[3:]
