"""MCP server spans of ``toolproof serve`` (OpenTelemetry MCP semantic conventions).

:class:`ServerSpans` is a context-tier middleware of the ``mcp`` SDK's low-level
``Server``: with telemetry on (:mod:`toolproof.tools.hooks`) each request or
notification a client sends is a ``SERVER`` span ``{mcp.method.name} {target}``
(``tools/call add``; ``prompts/get greet``; ``initialize``) whose parent is the
caller's span named by the W3C ``traceparent``/``tracestate`` in the request's
``params._meta`` (the span that was current here is linked). Attributes:
``mcp.method.name``, ``jsonrpc.request.id``, ``mcp.protocol.version``,
``mcp.session.id`` (streamable HTTP), ``network.transport`` (``pipe``/``tcp``),
``gen_ai.operation.name = execute_tool`` and ``gen_ai.tool.name`` for ``tools/call``,
``gen_ai.prompt.name``, ``mcp.resource.uri``; ``error.type`` is the JSON-RPC error code
(also ``rpc.response.status_code``) or ``tool_error`` for a result with ``isError``.
The tool's own ``execute_tool`` spans are its children.

It is layered in when the server is built with telemetry on; a server built with
telemetry off keeps the SDK's own middleware.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolproof.tools import hooks

__all__ = ["ServerSpans", "install_server_spans"]

INVALID_PARAMS = -32602
"""JSON-RPC: the params failed validation (what the SDK answers for a ``ValidationError``)."""

Handler = Callable[[Any], Awaitable[Any]]


def _carrier(meta: Any) -> dict[str, str]:
    """The W3C Trace Context keys of a request's ``_meta`` (a mapping in the SDK)."""
    if not isinstance(meta, Mapping):
        return {}
    keys = ("traceparent", "tracestate")
    return {key: meta[key] for key in keys if isinstance(meta.get(key), str)}


def _attributes(ctx: Any) -> tuple[str, dict[str, str | int]]:
    """The span name and first attributes of the request ``ctx``."""
    method: str = ctx.method
    params: Any = ctx.params if isinstance(ctx.params, Mapping) else {}
    attributes: dict[str, str | int] = {"mcp.method.name": method}
    if ctx.request_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.request_id)
    if ctx.protocol_version:
        attributes["mcp.protocol.version"] = str(ctx.protocol_version)
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
        session_id = headers.get("mcp-session-id")
        if session_id:
            attributes["mcp.session.id"] = session_id
        client = getattr(request, "client", None)
        if client is not None and getattr(client, "host", None):
            attributes["client.address"] = client.host
            attributes["client.port"] = int(client.port)
    else:
        attributes["network.transport"] = "pipe"
    name = params.get("name")
    target = name if isinstance(name, str) else None
    if method == "tools/call" and target is not None:
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = target
    elif method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    else:
        target = None
    uri = params.get("uri")
    if isinstance(uri, str) and method.startswith("resources/"):
        attributes["mcp.resource.uri"] = uri
    return (f"{method} {target}" if target else method), attributes


def _is_tool_error(result: Any) -> bool:
    if isinstance(result, Mapping):
        return result.get("isError") is True
    return getattr(result, "is_error", None) is True or getattr(result, "isError", None) is True


class ServerSpans:
    """The ``Server.middleware`` entry that makes each inbound MCP message a ``SERVER`` span.

    Args:
        hook: the telemetry layer the spans go to (:data:`toolproof.tools.hooks.LAYER`
            when the server was built).

    """

    def __init__(self, hook: hooks.TelemetryHook) -> None:
        self.hook = hook

    async def __call__(self, ctx: Any, call_next: Handler) -> Any:
        """Run ``call_next(ctx)`` inside the span of the message ``ctx``; return its result.

        Raises:
            MCPError: what the handler raised (recorded as ``error.type``), and any other
                exception the handler raised, unchanged.

        """
        hook = self.hook
        name, attributes = _attributes(ctx)
        with hook.span(name, attributes, kind="server", parent=_carrier(ctx.meta)) as span:
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                code = str(exc.error.code)
                span.set_attribute("rpc.response.status_code", code)
                hook.fail(span, code, exc.error.message)
                raise
            except ValidationError:
                code = str(INVALID_PARAMS)
                span.set_attribute("rpc.response.status_code", code)
                hook.fail(span, code, "Invalid request parameters")
                raise
            except Exception as exc:
                hook.fail(span, type(exc).__qualname__, str(exc))
                raise
            if ctx.method == "tools/call" and _is_tool_error(result):
                hook.fail(span, "tool_error", "")
            return result


def install_server_spans(server: Any) -> None:
    """Layer :class:`ServerSpans` into ``server.middleware`` (an SDK low-level ``Server``).

    With telemetry on (:func:`toolproof.instrument` called before the server is built,
    as ``toolproof serve`` does) it takes the place of the SDK's own OpenTelemetry
    middleware, or goes first when there is none; with telemetry off the server keeps
    the SDK's middleware as it is.
    """
    if hooks.LAYER is hooks.OFF:
        return
    spans = ServerSpans(hooks.LAYER)
    middleware = list(getattr(server, "middleware", []))
    for index, entry in enumerate(middleware):
        if type(entry).__name__ == "OpenTelemetryMiddleware":
            middleware[index] = spans
            break
    else:
        middleware.insert(0, spans)
    server.middleware = middleware
