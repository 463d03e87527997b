"""Rich tool results: MCP content blocks (text, images, audio, resources) as a JSON value.

A tool value is plain JSON (DESIGN §4), so rich results travel as one tagged JSON
object, the **content value**::

    {"toolproof/content": [<block>, ...],      # MCP content blocks in wire form
     "structuredContent": <JSON>,              # optional, as the server sent it
     "_meta": {...}}                           # optional, as the server sent it

Blocks are the MCP ``ContentBlock`` wire form (MCP spec 2025-06-18, "Tool Result"):
``{"type": "text", "text"}``, ``{"type": "image", "data": <base64>, "mimeType"}``,
``{"type": "audio", ...}``, ``{"type": "resource", "resource": {"uri", "text" |
"blob", "mimeType"}}``, ``{"type": "resource_link", "uri", "name", ...}``. An object is a
content value exactly when it has the ``toolproof/content`` key holding a list of
objects with a string ``type``, and no keys besides the three above. Backends, wrappers,
traces and evidence carry it like any other value; ``toolproof serve`` answers its blocks
as the blocks they are. Its evidence bytes are its canonical JSON (RFC 8785), so the
base64 of an image is stored and digested exactly.

From Python, a tool returns :class:`Image`, :class:`Audio`, :class:`EmbeddedResource`,
:class:`ResourceLink`, or a list mixing them with strings (text blocks);
:func:`rich_value` turns such a return value into the content value.
"""

from __future__ import annotations

import base64
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

__all__ = [
    "CONTENT_KEY",
    "Audio",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "content_blocks",
    "content_value",
    "is_content",
    "mentions_content",
    "rich_value",
]

CONTENT_KEY = "toolproof/content"
"""The key of a content value that holds its list of MCP content blocks."""
_KEYS = frozenset({CONTENT_KEY, "structuredContent", "_meta"})


def _b64(data: bytes, what: str) -> str:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{what}.data must be bytes, got {type(data).__name__}")
    return base64.b64encode(bytes(data)).decode("ascii")


@dataclass(frozen=True)
class Image:
    """An image result: an MCP ``image`` block.

    Attributes:
        data: the image's bytes (sent base64-encoded).
        mime_type: its media type, e.g. ``image/png``.

    """

    data: bytes
    mime_type: str = "image/png"

    def block(self) -> dict[str, Any]:
        """The MCP wire block ``{"type": "image", "data": <base64>, "mimeType"}``."""
        return {"type": "image", "data": _b64(self.data, "Image"), "mimeType": self.mime_type}


@dataclass(frozen=True)
class Audio:
    """An audio result: an MCP ``audio`` block.

    Attributes:
        data: the audio's bytes (sent base64-encoded).
        mime_type: its media type, e.g. ``audio/wav``.

    """

    data: bytes
    mime_type: str = "audio/wav"

    def block(self) -> dict[str, Any]:
        """The MCP wire block ``{"type": "audio", "data": <base64>, "mimeType"}``."""
        return {"type": "audio", "data": _b64(self.data, "Audio"), "mimeType": self.mime_type}


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource embedded in a result: an MCP ``resource`` block.

    Attributes:
        uri: the resource's URI.
        text: its text, for a text resource.
        blob: its bytes, for a binary resource (sent base64-encoded).
        mime_type: its media type (``text/plain``, ``application/octet-stream``...).

    Raises:
        ValueError: not exactly one of ``text`` and ``blob`` is given.

    """

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError(
                f"EmbeddedResource {self.uri!r}: give exactly one of text and blob "
                "(MCP TextResourceContents or BlobResourceContents)"
            )

    def contents(self) -> dict[str, Any]:
        """The MCP ``TextResourceContents`` or ``BlobResourceContents`` of the resource."""
        body: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            body["mimeType"] = self.mime_type
        if self.blob is not None:
            body["blob"] = _b64(self.blob, "EmbeddedResource")
        else:
            body["text"] = self.text
        return body

    def block(self) -> dict[str, Any]:
        """The MCP wire block ``{"type": "resource", "resource": {...}}``."""
        return {"type": "resource", "resource": self.contents()}


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource the client may read: an MCP ``resource_link`` block.

    Attributes:
        uri: the resource's URI.
        name: its name.
        description: what it holds, or ``None``.
        mime_type: its media type, or ``None``.

    """

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def block(self) -> dict[str, Any]:
        """The MCP wire block ``{"type": "resource_link", "uri", "name", ...}``."""
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description is not None:
            block["description"] = self.description
        if self.mime_type is not None:
            block["mimeType"] = self.mime_type
        return block


_RICH = (Image, Audio, EmbeddedResource, ResourceLink)


def content_value(
    blocks: Sequence[Mapping[str, Any]],
    *,
    structured: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The content value of ``blocks`` (wire form), with ``structuredContent``/``_meta``.

    Args:
        blocks: MCP content blocks in wire form (camelCase JSON).
        structured: the ``structuredContent``, or ``None`` for none.
        meta: the result's ``_meta``, or ``None`` for none.

    Returns:
        ``{"toolproof/content": [...]}`` plus the optional keys given.

    """
    value: dict[str, Any] = {CONTENT_KEY: [dict(block) for block in blocks]}
    if structured is not None:
        value["structuredContent"] = structured
    if meta:
        value["_meta"] = dict(meta)
    return value


def is_content(value: Any) -> bool:
    """Whether ``value`` is a content value (see the module docstring)."""
    if type(value) is not dict or CONTENT_KEY not in value or not value.keys() <= _KEYS:
        return False
    blocks = value[CONTENT_KEY]
    return type(blocks) is list and all(
        type(block) is dict and isinstance(block.get("type"), str) for block in blocks
    )


def content_blocks(value: Any) -> list[dict[str, Any]] | None:
    """The blocks of a content value, or ``None`` when ``value`` is not one."""
    return value[CONTENT_KEY] if is_content(value) else None


def rich_value(value: Any) -> dict[str, Any] | None:
    """The content value of a Python tool's return value, or ``None`` when it is not rich.

    Rich is an :class:`Image`, :class:`Audio`, :class:`EmbeddedResource` or
    :class:`ResourceLink`, or a list or tuple holding at least one of them, whose other
    items are strings (text blocks) or such objects.

    Raises:
        TypeError: a list mixes rich items with something that is neither a string nor
            a rich item (the message names the index and the type).

    """
    if isinstance(value, _RICH):
        return content_value([value.block()])
    if not isinstance(value, list | tuple) or not any(isinstance(i, _RICH) for i in value):
        return None
    blocks: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
        elif isinstance(item, _RICH):
            blocks.append(item.block())
        else:
            raise TypeError(
                f"item {index} of a rich result is a {type(item).__name__}: a list of "
                "content holds only str, Image, Audio, EmbeddedResource and ResourceLink"
            )
    return content_value(blocks)


def mentions_content(annotation: Any) -> bool:
    """Whether a return annotation names a rich type (then it has no output schema)."""
    if annotation in _RICH:
        return True
    if isinstance(annotation, typing.ForwardRef | str):
        return False
    return any(mentions_content(arg) for arg in get_args(annotation))
