"""Shared parts of the MCP tool source: where a server is, and what can go wrong.

:class:`McpServer` is a resolved ``[[mcp]]`` entry; :class:`McpStartError` and
:class:`McpCallError` are what :class:`~toolproof.sources.mcp.connection.McpConnection`
raises; the helpers read SDK objects the same way for the ``mcp`` 1.x and 2.x clients.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import IO, Any

import httpx2
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp.types import SERVER_INFO_META_KEY

from toolproof.contract.bounds import STDIO_MESSAGE_BYTES
from toolproof.sources.mcp.oauth import McpAuth

__all__ = [
    "CONNECTION_CLOSED",
    "ENVELOPE_META_KEYS",
    "METHOD_NOT_FOUND",
    "SDK_ERRORS",
    "STDERR_TAIL_BYTES",
    "McpCallError",
    "McpServer",
    "McpStartError",
    "error_code",
    "handshake",
    "notification_method",
    "skip_result_check",
    "stderr_tail",
    "unstamped",
    "wire",
]

CONNECTION_CLOSED = -32000
"""JSON-RPC code the SDK uses for "connection closed" (the server went away)."""
METHOD_NOT_FOUND = -32601
"""JSON-RPC: the server does not serve the method (an optional method it lacks is skipped)."""
STDERR_TAIL_BYTES = 2000
"""How much of the end of a server's stderr an error report quotes (bytes)."""

_EXCEPTIONS: Any = importlib.import_module("mcp.shared.exceptions")
SDK_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(_EXCEPTIONS, name) for name in ("MCPError", "McpError") if hasattr(_EXCEPTIONS, name)
)
"""The SDK's JSON-RPC error class: ``MCPError`` (2.x) or ``McpError`` (1.x)."""


async def _no_result_check(name: str, result: Any) -> None:
    """The Tool's bounded check of the result replaces the SDK's (see :func:`skip_result_check`)."""


def skip_result_check(session: Any) -> None:
    """Leave the check of a ``tools/call`` result against ``outputSchema`` to the Tool.

    The ``mcp`` client checks ``structuredContent`` with python-jsonschema inside the
    event loop, unbounded: a server's heavy ``outputSchema`` and a large result would
    hold every other call and client of ``toolproof serve`` meanwhile. The tool bound
    from the server checks the same value against the same schema within its limits
    (``MAX_VALIDATION_WORK``, and in a bounded worker when the schema needs isolation:
    :mod:`toolproof.schema.isolation`). :class:`mcp.Client` builds its own
    ``ClientSession``, so the session's public ``validate_tool_result`` hook is
    replaced on that instance.
    """
    session.validate_tool_result = _no_result_check


def handshake(client: Any) -> dict[str, Any]:
    """What the negotiation settled, in the shape of an ``initialize`` result (wire form).

    ``protocolVersion`` (``2026-07-28`` after ``server/discover``, ``2025-11-25`` or
    older after ``initialize``), ``capabilities``, and ``serverInfo`` and
    ``instructions`` when the server gave them (a 2026-07-28 server may stay anonymous).
    """
    settled: dict[str, Any] = {
        "protocolVersion": client.protocol_version,
        "capabilities": wire(client.server_capabilities),
    }
    if client.server_info is not None:
        settled["serverInfo"] = wire(client.server_info)
    if client.instructions:
        settled["instructions"] = client.instructions
    return settled


@dataclass(frozen=True)
class McpServer:
    """Where and how to reach one MCP server (a resolved ``[[mcp]]`` entry).

    Attributes:
        name: the server's name in the config (``git``); used in owners and messages.
        command: the executable (stdio); ``None`` for streamable HTTP.
        args: its arguments.
        env: variables added to the client's environment (the server inherits the rest).
        cwd: the server's working directory (absolute), or ``None`` for the client's.
        url: the streamable-HTTP endpoint; ``None`` for stdio.
        headers: HTTP headers sent with every request (streamable HTTP only).
        prefix: tool names become ``<prefix>_<tool>``; ``None`` means ``name``, ``""``
            keeps the server's names.
        startup_timeout: seconds allowed from launch to the ``tools/list`` answer.
        call_timeout: seconds allowed for one ``tools/call``.
        max_message_bytes: the longest JSON-RPC message (one line of stdout, bytes) a
            stdio server may write; a longer one stops the server
            (:data:`~toolproof.sources.mcp.stdio.EXIT_WATCH`).
        include: globs over the server's tool names; only matching tools bind
            (``None``: all).
        exclude: globs over the server's tool names; matching tools do not bind.
        protocol: ``auto``: ``server/discover`` at 2026-07-28, falling back to the
            ``initialize`` handshake; ``2025-11-25``: the handshake only (the server
            may settle on an older revision).
        auth: OAuth for a streamable-HTTP server (``[mcp.auth]``), or ``None``.

    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prefix: str | None = None
    startup_timeout: float = 30.0
    call_timeout: float = 60.0
    max_message_bytes: int = STDIO_MESSAGE_BYTES
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    protocol: str = "auto"
    auth: McpAuth | None = None


class McpStartError(Exception):
    """A server could not be started, initialized or listed.

    Attributes:
        reason: what went wrong (``exited before answering initialize``...).
        stderr: the tail of the server's stderr (stdio), possibly empty; ``None`` for
            streamable HTTP.

    """

    def __init__(self, reason: str, stderr: str | None) -> None:
        self.reason = reason
        self.stderr = stderr
        if stderr is None:  # streamable HTTP: no process of ours
            super().__init__(reason)
        else:
            super().__init__(
                reason + (f"; stderr tail: {stderr}" if stderr else "; stderr was empty")
            )


class McpCallError(Exception):
    """A ``tools/call`` got no result.

    Attributes:
        kind: ``transport`` (the connection is gone or broke), ``timeout``,
            ``protocol`` (the server answered a JSON-RPC error or a malformed result),
            ``invalid_result`` (the SDK refused the structured content against the
            tool's ``outputSchema``) or ``cancelled`` (the server cancelled the call's
            task, :mod:`toolproof.sources.mcp.tasks`).
        code: the JSON-RPC error code, when there is one.

    """

    def __init__(self, kind: str, message: str, code: int | None = None) -> None:
        self.kind = kind
        self.code = code
        super().__init__(message)


def stderr_tail(file: IO[bytes] | None, limit: int = STDERR_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a captured stderr file, decoded, stripped.

    Reads with ``os.pread`` so the file offset the server writes at is left alone.
    """
    if file is None or file.closed:
        return ""
    fd = file.fileno()
    size = os.fstat(fd).st_size
    start = max(0, size - limit)
    text = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
    return text.strip()


def wire(model: Any) -> dict[str, Any]:
    """An SDK model in MCP wire form (camelCase JSON, ``None`` fields left out)."""
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


ENVELOPE_META_KEYS = frozenset({SERVER_INFO_META_KEY, SUBSCRIPTION_ID_META_KEY})
"""The 2026-07-28 envelope keys a server stamps into ``_meta``: its ``serverInfo`` (every
result, display-only) and the ``subscriptionId`` of a ``subscriptions/listen`` stream
(every notification on it)."""


def unstamped(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a result or notification params, wire form) without the envelope keys.

    The same tool answers the same value, and the same change reads the same, over both
    revisions: :data:`ENVELOPE_META_KEYS` are left out of ``_meta`` (and ``_meta`` with
    them when nothing else is in it).
    """
    meta = result.get("_meta")
    if not isinstance(meta, dict) or ENVELOPE_META_KEYS.isdisjoint(meta):
        return result
    kept = {key: value for key, value in meta.items() if key not in ENVELOPE_META_KEYS}
    rest = {key: value for key, value in result.items() if key != "_meta"}
    return {**rest, "_meta": kept} if kept else rest


def error_code(exc: BaseException) -> int | None:
    """The JSON-RPC error code of an SDK error (``.code`` in 2.x, ``.error.code`` in 1.x)."""
    code = getattr(exc, "code", None)  # 2.x MCPError
    if code is None:
        code = getattr(getattr(exc, "error", None), "code", None)  # 1.x McpError
    return code if isinstance(code, int) else None


def notification_method(message: Any) -> str | None:
    """The ``method`` of a server notification (1.x wraps it in a RootModel)."""
    inner = getattr(message, "root", message)  # 1.x wraps notifications in a RootModel
    method = getattr(inner, "method", None)
    return method if isinstance(method, str) else None


HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The streamable-HTTP client's timeouts (seconds): 30 to connect, write and wait for a pooled
connection; 300 to read, since a server may hold a response stream open (the SDK's defaults)."""


def http_client(headers: dict[str, str], auth: httpx2.Auth | None) -> httpx2.AsyncClient:
    """The HTTP client a streamable-HTTP ``[[mcp]]`` connection hands the SDK's transport.

    Built as ``mcp.client.streamable_http.streamable_http_client`` documents for a client
    with headers or authentication (an ``httpx2.AsyncClient`` passed as ``http_client``).

    Args:
        headers: the server's configured headers, sent on every request.
        auth: the OAuth provider (``httpx2.Auth``), or ``None``.

    Returns:
        An unopened client with :data:`HTTP_TIMEOUT`; the caller enters it as a context.

    """
    return httpx2.AsyncClient(headers=dict(headers), auth=auth, timeout=HTTP_TIMEOUT)
