"""MCP client spans of the MCP tool source (OpenTelemetry MCP semantic conventions).

With telemetry on (:mod:`toolproof.tools.hooks`), each ``tools/call`` to an imported
server is a ``CLIENT`` span ``tools/call {tool}`` (the server's own tool name) with
``mcp.method.name``, ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``,
``jsonrpc.request.id``, ``mcp.protocol.version``, ``mcp.session.id`` (streamable HTTP),
``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP) and ``server.address`` /
``server.port``; its W3C ``traceparent``/``tracestate`` travel in the request's
``params._meta`` so the server's span continues the trace. Other requests
(``resources/read``, ``prompts/get``...) are spans ``{method}`` with the same
attributes. A failure sets ``error.type``: the JSON-RPC error code (and
``rpc.response.status_code``), ``tool_error`` for a result with ``isError``, else
the failure kind (``timeout``, ``transport``...).

The JSON-RPC id of a request is read from the message the SDK writes (:class:`Outbox`
wraps the session's write stream), so it is exact for the ``mcp`` 1.x and 2.x clients.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from toolproof.sources.mcp.common import McpCallError, McpServer
from toolproof.tools import hooks

__all__ = ["Outbox", "SessionFacts", "traced"]

_SENT: ContextVar[list[Any] | None] = ContextVar("toolproof_mcp_sent_id", default=None)
"""Where :class:`Outbox` puts the id of the first request the current call writes."""


class Outbox:
    """The session's write stream, passed through; notes the id of a traced request.

    Args:
        inner: the transport's write stream (an anyio send stream).
        rewrite: applied to each message before it is sent (a ``SessionMessage`` in, one
            out, in the sending task: :meth:`~toolproof.sources.mcp.callers.Callers.forward`),
            or ``None``.

    """

    def __init__(self, inner: Any, rewrite: Callable[[Any], Any] | None = None) -> None:
        self._inner = inner
        self._rewrite = rewrite

    async def send(self, message: Any) -> None:
        """Send ``message`` (a ``SessionMessage``), noting its request id for the current span."""
        if self._rewrite is not None:
            message = self._rewrite(message)
        sink = _SENT.get()
        if sink is not None and not sink:
            payload = getattr(message, "message", None)
            payload = getattr(payload, "root", payload)  # 1.x wraps it in a RootModel
            request_id = getattr(payload, "id", None)
            if getattr(payload, "method", None) is not None and request_id is not None:
                sink.append(request_id)
        await self._inner.send(message)

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._inner.aclose()

    def close(self) -> None:
        """Close the inner stream (synchronously)."""
        self._inner.close()

    async def __aenter__(self) -> Outbox:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)

    def __enter__(self) -> Outbox:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return self._inner.__exit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SessionFacts:
    """What the client spans of one connection share: transport, server, protocol, session.

    Args:
        server: the configured server.

    """

    def __init__(self, server: McpServer) -> None:
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self.base: dict[str, str | int] = {}
        if server.url is not None:
            parts = urlsplit(server.url)
            self.base["network.transport"] = "tcp"
            self.base["network.protocol.name"] = "http"
            if parts.hostname:
                self.base["server.address"] = parts.hostname
                self.base["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        else:
            self.base["network.transport"] = "pipe"

    async def on_response(self, response: Any) -> None:
        """Note the ``Mcp-Session-Id`` a streamable-HTTP response carries (an httpx hook)."""
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id

    def attributes(self, method: str, tool: str | None) -> dict[str, str | int]:
        """The attributes a span of ``method`` starts with."""
        attributes: dict[str, str | int] = {"mcp.method.name": method, **self.base}
        if tool is not None:
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = tool
        if self.protocol_version:
            attributes["mcp.protocol.version"] = self.protocol_version
        if self.session_id:
            attributes["mcp.session.id"] = self.session_id
        return attributes


@contextmanager
def _sent_id() -> Iterator[list[Any]]:
    sink: list[Any] = []
    token = _SENT.set(sink)
    try:
        yield sink
    finally:
        _SENT.reset(token)


async def traced(
    facts: SessionFacts,
    method: str,
    tool: str | None,
    send: Callable[[dict[str, str]], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Run ``send(meta)`` inside the client span of ``method``; return its wire result.

    Args:
        facts: the connection's shared facts.
        method: the MCP method (``tools/call``...).
        tool: the server's tool name for ``tools/call`` (the span's target), else ``None``.
        send: sends the request with ``meta`` (the span's W3C carrier) as
            ``params._meta``; returns the result (wire form) or raises
            :class:`McpCallError`.

    Raises:
        McpCallError: what ``send`` raised, after the span recorded it.

    """
    name = f"{method} {tool}" if tool is not None else method
    error: McpCallError | None = None
    result: dict[str, Any] = {}
    attributes = facts.attributes(method, tool)
    with hooks.span(name, attributes, kind="client") as span, _sent_id() as sent:
        try:
            result = await send(hooks.carrier())
        except McpCallError as exc:
            error = exc
            if exc.code is not None:
                span.set_attribute("rpc.response.status_code", str(exc.code))
            hooks.fail(span, str(exc.code) if exc.code is not None else exc.kind, str(exc))
        else:
            if method == "tools/call" and result.get("isError") is True:
                hooks.fail(span, "tool_error", "the tool answered isError")
        if sent:
            span.set_attribute("jsonrpc.request.id", str(sent[0]))
    if error is not None:
        raise error
    return result
