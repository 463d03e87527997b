"""Serve a sealed :class:`~toolproof.tools.toolset.Toolset` as an MCP server.

Every tool and variant of the Toolset is listed (``tools/list``) with its input
schema, its annotations and, when the tool declares or inherits one, its output
schema. ``tools/call`` goes through exactly the path of an in-process call,
``await toolset[name].call(arguments)``: validation, extensions and backends apply.

Wire rules (MCP specification 2025-06-18 and later):

* A successful call answers one text block and, when the tool has an output schema
  or returns a JSON object, ``structuredContent``. The text is the value itself when
  it is a string, else its canonical JSON (RFC 8785): the *result bytes*
  a recorded session stores as evidence.
* MCP through 2025-11-25 requires an output schema whose root is
  ``{"type": "object"}``. A non-object output schema ``S`` is listed wrapped as
  ``{"type": "object", "properties": {"result": S}, "required": ["result"]}`` and the
  structured content is ``{"result": value}``; the local ``$ref`` targets inside ``S``
  are rewritten to point into the wrapper.
* A :class:`~toolproof.contract.tools.ToolFailure` answers ``isError: true`` with
  the text ``"<kind>: <message>"`` (validation messages name the argument) and the
  failure as JSON under ``_meta["toolproof/failure"]``.
* An unknown tool name is a JSON-RPC error (``-32602``, from
  :func:`toolproof.errors.error_mapping`) naming the tool.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from toolproof import __version__
from toolproof.adapters.asgi import serve_asgi
from toolproof.adapters.tokens import BearerGuard
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.errors import CanonicalizationError, ToolCallError, ToolNameError, error_mapping
from toolproof.evidence.encoding import encode_value
from toolproof.runs.session import Admission, LiveSession
from toolproof.tools.observe import Observation, observe_failures
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = [
    "FAILURE_META_KEY",
    "WRAP_KEY",
    "CallObserver",
    "McpAnswer",
    "SessionObserver",
    "build_server",
    "mcp_output_schema",
    "mcp_result",
    "mcp_tool",
    "serve_http",
    "serve_stdio",
]

WRAP_KEY = "result"
"""The property that carries a non-object result in wrapped structured content."""

FAILURE_META_KEY = "toolproof/failure"
"""The ``_meta`` key of an error result that holds the :class:`ToolFailure` as JSON."""


class CallObserver(Protocol):
    """What a served call reports to (a recorded session); both methods are synchronous.

    ``call_started`` runs after the tool is found and before it is called, and returns
    a token handed back to ``call_finished``; it may raise :class:`ToolCallError` to
    refuse the call (the client gets that failure, the tool is not called). A call
    cancelled in between never reaches ``call_finished``, which may raise
    :class:`ToolCallError` too (the call ran but cannot be recorded): the client gets
    that failure instead of the result.
    """

    def call_started(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """Note a call of ``tool`` with ``arguments`` (the caller's object); return a token."""
        ...

    def call_finished(
        self, token: Any, result: ToolResult, reply: bytes, seen: Observation
    ) -> None:
        """Note the outcome: the result and exact bytes answered, and every failure seen.

        Args:
            token: what ``call_started`` returned.
            result: the outcome answered.
            reply: the bytes of the answer's text block.
            seen: what the tool's layers reported during the call
                (:func:`toolproof.tools.observe.observe_failures`): every failure, the
                answered one included, and which layer recovered from which.

        """
        ...


class SessionObserver:
    """The :class:`CallObserver` of ``serve --record``: every served call into a live session.

    Args:
        session: the live session (:func:`toolproof.runs.session.open_session`).

    """

    def __init__(self, session: LiveSession) -> None:
        self.session = session

    def call_started(self, tool: Tool, arguments: dict[str, Any]) -> Admission:
        """Admit the call for recording before the tool runs.

        Raises:
            ToolCallError: it cannot be recorded (see :meth:`LiveSession.admit`).

        """
        return self.session.admit(tool.name, arguments)

    def call_finished(
        self, token: Admission, result: ToolResult, reply: bytes, seen: Observation
    ) -> None:
        """Record the call's block before it is answered.

        Raises:
            ToolCallError: the block cannot be written (see :meth:`LiveSession.record`).

        """
        self.session.record(token, result, seen)


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
            failure when its value has no canonical JSON form.
        reply: the MCP ``CallToolResult``.
        data: the UTF-8 bytes of the reply's text block; for a value, its evidence
            bytes (:func:`toolproof.evidence.encoding.encode_value`: a string's UTF-8,
            else its canonical JSON).

    """

    result: ToolResult
    reply: types.CallToolResult
    data: bytes


def mcp_result(tool: Tool, result: ToolResult) -> McpAnswer:
    """Translate a :class:`ToolResult` of ``tool`` into the MCP answer (see the module rules)."""
    failure = result.failure
    if failure is not None:
        text = f"{failure.kind}: {failure.message}"
        reply = types.CallToolResult(
            content=[types.TextContent(text=text)],
            is_error=True,
            _meta={FAILURE_META_KEY: failure.to_json()},
        )
        return McpAnswer(result, reply, text.encode("utf-8"))
    try:
        data, _ = encode_value(result.value)
    except CanonicalizationError as exc:
        problem = f"tool {tool.name!r} returned a value with no canonical JSON form: {exc.message}"
        return mcp_result(tool, ToolResult.fail("invalid_result", problem, where="output"))
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


def _failed(failure: ToolFailure) -> ToolResult:
    return ToolResult.model_construct(
        schema_version=SCHEMA_VERSION, ok=False, value=None, failure=failure
    )


def _unknown_tool(toolset: Toolset, name: str) -> MCPError:
    known = toolset.names()
    shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
    error = ToolNameError(name, f"no such tool in this toolset (known: {shown or 'none'})")
    return MCPError(error_mapping(error).mcp_code, error.message)


def build_server(
    toolset: Toolset,
    *,
    observer: CallObserver | None = None,
    name: str = "toolproof",
    instructions: str | None = None,
) -> Server[Any]:
    """Build the low-level MCP ``Server`` that lists and calls every tool of ``toolset``.

    Args:
        toolset: a sealed Toolset; the server never adds to it nor closes it.
        observer: told about every call that reaches a tool (see :class:`CallObserver`).
        name: the server name announced in ``serverInfo``.
        instructions: optional instructions announced to clients.

    Returns:
        An ``mcp.server.lowlevel.Server``; run it with :func:`serve_stdio` or
        :func:`serve_http`.

    """
    listing = types.ListToolsResult(tools=[mcp_tool(tool) for tool in toolset])
    schemas = {tool.name: tool.spec.input_schema for tool in toolset}

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = toolset.get(params.name)
        if tool is None:
            raise _unknown_tool(toolset, params.name)
        arguments: Any = params.arguments if params.arguments is not None else {}
        if observer is None:
            return mcp_result(tool, await tool.call(arguments)).reply
        try:
            token = observer.call_started(tool, arguments)
        except ToolCallError as refused:
            return mcp_result(tool, _failed(refused.failure)).reply
        with observe_failures() as seen:
            answer = mcp_result(tool, await tool.call(arguments))
        try:
            observer.call_finished(token, answer.result, answer.data, seen)
        except ToolCallError as unrecorded:
            return mcp_result(tool, _failed(unrecorded.failure)).reply
        return answer.reply

    return Server(
        name,
        version=__version__,
        instructions=instructions,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin/stdout until stdin closes."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any], host: str, port: int, stop: asyncio.Event, *, token: str | None = None
) -> None:
    """Serve ``server`` over MCP streamable HTTP at ``http://HOST:PORT/mcp`` until ``stop`` is set.

    On a loopback host the SDK's DNS-rebinding protection is on (only loopback
    ``Host``/``Origin`` headers are accepted). With ``token``, every request must carry
    ``Authorization: Bearer <token>`` (401 otherwise). In-flight requests finish before
    it returns.
    """
    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerGuard(app, token)
    await serve_asgi(app, host, port, stop)
