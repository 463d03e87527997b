"""How a tool and its results look on the MCP wire: listings, output schemas, content.

Wire rules (MCP specification 2025-06-18 and later, "Tools"):

* A value answers one text block and, when the tool has an output schema or returns
  a JSON object, ``structuredContent``. The text is the value itself when it is a
  string, else its canonical JSON (RFC 8785): the *result bytes* a recorded session
  stores as evidence.
* A content value (:mod:`toolproof.tools.content`: an imported server's images,
  audio, resources, links, several blocks; a Python tool's ``Image``...) answers its
  blocks as the blocks they are, with its ``structuredContent`` and ``_meta`` as
  they were; its result bytes are its canonical JSON.
* MCP through 2025-11-25 requires an output schema whose root is
  ``{"type": "object"}``. A non-object output schema ``S`` is listed wrapped as
  ``{"type": "object", "properties": {"result": S}, "required": ["result"]}`` and the
  structured content is ``{"result": value}``; the local ``$ref`` targets inside ``S``
  are rewritten to point into the wrapper.
* A :class:`~toolproof.contract.tools.ToolFailure` answers ``isError: true`` with
  the text ``"<kind>: <message>"`` (validation messages name the argument) and the
  failure as JSON under ``_meta["toolproof/failure"]``; an imported tool's own
  error (kind ``tool_error`` with the server's blocks in ``detail.content``) answers
  those blocks instead of the text.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, NamedTuple

import mcp_types as types
from pydantic import ValidationError

from toolproof.adapters.server_paths import hide_server_paths
from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.errors import CanonicalizationError
from toolproof.evidence.encoding import encode_value
from toolproof.tools.content import content_blocks
from toolproof.tools.tool import Tool

__all__ = [
    "FAILURE_META_KEY",
    "WRAP_KEY",
    "McpAnswer",
    "mcp_output_schema",
    "mcp_result",
    "mcp_tool",
]

WRAP_KEY = "result"
"""The property that carries a non-object result in wrapped structured content."""

FAILURE_META_KEY = "toolproof/failure"
"""The ``_meta`` key of an error result that holds the :class:`ToolFailure` as JSON."""


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#"):
                out[key] = f"#/properties/{WRAP_KEY}{value[1:]}"
            else:
                out[key] = _rewrite_refs(value)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(item) for item in node]
    return node


def _wraps(schema: Mapping[str, Any] | None) -> bool:
    return schema is not None and schema.get("type") != "object"


def mcp_output_schema(schema: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """The output schema to list for a tool, and whether it is wrapped.

    Args:
        schema: the tool's output schema (``None`` when it has none).

    Returns:
        ``(schema, wrapped)``: an object schema is returned as is (a deep copy) and
        ``wrapped`` is False; any other schema ``S`` becomes ``{"type": "object",
        "properties": {"result": S'}, "required": ["result"]}`` where ``S'`` has its
        local ``$ref`` targets rewritten (unless ``S`` sets its own ``$id``) and its
        ``$schema`` moved to the wrapper. ``(None, False)`` when there is no schema.

    """
    if schema is None:
        return None, False
    inner = copy.deepcopy(dict(schema))
    if not _wraps(inner):
        return inner, False
    dialect = inner.pop("$schema", None)
    if "$id" not in inner:
        inner = _rewrite_refs(inner)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {WRAP_KEY: inner},
        "required": [WRAP_KEY],
    }
    if dialect is not None:
        wrapped = {"$schema": dialect, **wrapped}
    return wrapped, True


def mcp_tool(tool: Tool) -> types.Tool:
    """The MCP ``Tool`` listing of ``tool``: name, description, schemas, annotations."""
    spec = tool.spec
    output_schema, _ = mcp_output_schema(spec.output_schema)
    hints = spec.annotations.model_dump(exclude_none=True, exclude={"schema_version"})
    return types.Tool(
        name=spec.name,
        title=hints.get("title"),
        description=spec.description or None,
        input_schema=copy.deepcopy(spec.input_schema),
        output_schema=output_schema,
        annotations=types.ToolAnnotations.model_validate(hints) if hints else None,
    )


class McpAnswer(NamedTuple):
    """What a served call answers.

    Attributes:
        result: the outcome answered: the tool's result, or an ``invalid_result``
            failure when its value has no canonical JSON form or holds blocks that are
            not MCP content.
        reply: the MCP ``CallToolResult``.
        data: for a value, its evidence bytes
            (:func:`toolproof.evidence.encoding.encode_value`: a string's UTF-8, else its
            canonical JSON, a content value's included); for a failure, the UTF-8 of
            ``"<kind>: <message>"``.

    """

    result: ToolResult
    reply: types.CallToolResult
    data: bytes


def _server_blocks(failure: ToolFailure) -> list[types.ContentBlock] | None:
    """An imported tool's own error blocks (``detail.content``), when they are MCP content."""
    blocks = failure.detail.get("content")
    if failure.kind != "tool_error" or not isinstance(blocks, list) or not blocks:
        return None
    try:
        return types.CallToolResult.model_validate({"content": blocks}).content
    except ValidationError:
        return None


def _content_reply(tool: Tool, value: dict[str, Any]) -> types.CallToolResult | ToolResult:
    wire: dict[str, Any] = {"content": content_blocks(value)}
    for key in ("structuredContent", "_meta"):
        if key in value:
            wire[key] = value[key]
    try:
        return types.CallToolResult.model_validate(wire)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = "/".join(str(part) for part in error["loc"])
        problem = f"tool {tool.name!r} returned content that is not MCP content: {where}: "
        return ToolResult.fail("invalid_result", problem + error["msg"], where="output")


def mcp_result(tool: Tool, result: ToolResult) -> McpAnswer:
    """Translate a :class:`ToolResult` of ``tool`` into the MCP answer (see the module rules).

    A failure's message names no absolute server path
    (:mod:`toolproof.adapters.server_paths`): the answer, and the result returned for
    the record, carry the message with locations as labels (``<cwd>/data.csv``).
    """
    failure = result.failure
    if failure is not None:
        public = hide_server_paths(failure.message)
        if public != failure.message:  # what the client is answered is what is recorded
            failure = failure.model_copy(update={"message": public})
            result = ToolResult.model_construct(
                schema_version=result.schema_version, ok=False, value=None, failure=failure
            )
        text = f"{failure.kind}: {failure.message}"
        reply = types.CallToolResult(
            content=_server_blocks(failure) or [types.TextContent(text=text)],
            is_error=True,
            _meta={FAILURE_META_KEY: failure.to_json()},
        )
        return McpAnswer(result, reply, text.encode("utf-8"))
    try:
        data, _ = encode_value(result.value)
    except CanonicalizationError as exc:
        problem = f"tool {tool.name!r} returned a value with no canonical JSON form: {exc.message}"
        return mcp_result(tool, ToolResult.fail("invalid_result", problem, where="output"))
    value: Any = result.value
    if content_blocks(value) is not None:
        answer = _content_reply(tool, value)
        if isinstance(answer, ToolResult):
            return mcp_result(tool, answer)
        return McpAnswer(result, answer, data)
    structured: Any = None
    if _wraps(tool.spec.output_schema):
        structured = {WRAP_KEY: result.value}
    elif tool.spec.output_schema is not None or isinstance(result.value, dict):
        structured = result.value
    content: list[types.ContentBlock] = [types.TextContent(text=data.decode("utf-8"))]
    if structured is None:
        return McpAnswer(result, types.CallToolResult(content=content), data)
    reply = types.CallToolResult(content=content, structured_content=structured)
    return McpAnswer(result, reply, data)
