"""MCP servers as a tool source: each listed tool becomes a :class:`ToolContribution`.

:func:`bind_mcp_servers` starts every server at once (see
:class:`~toolproof.sources.mcp.connection.McpConnection`), binds each listed tool under
``<prefix>_<tool>`` with its ``inputSchema``, ``outputSchema`` and annotations
exactly as the server declared them, and ties every session to the Toolset's
lifetime. A server that cannot be started is quarantined (name = server name,
field ``mcp[i]``) with its stderr tail; the other servers' tools still bind.

Result mapping of one ``tools/call`` (MCP spec 2025-06-18, "Tools"):

* ``isError: true`` -> failure ``tool_error`` (where ``body``), the message carries
  the text content blocks joined by newlines; ``detail.content`` the blocks.
* success, the tool declares ``outputSchema`` -> the ``structuredContent`` object
  (validated against ``outputSchema`` by the Tool).
* success otherwise: exactly one plain ``text`` block (no annotations, no ``_meta``,
  no ``structuredContent``) -> that string; anything else (no block, several, images,
  audio, resources, resource links) -> the content value
  (:mod:`toolproof.tools.content`): ``{"toolproof/content": <the blocks in wire form>}``
  with the result's ``structuredContent`` and ``_meta`` when present, which
  ``toolproof serve`` answers as the same blocks.
* no answer within ``call_timeout`` -> ``timeout`` (where ``transport``, retryable);
  the server died or the connection broke -> ``transport``; a JSON-RPC error
  answer -> ``tool_error`` with ``detail.code``; the SDK refusing structured content
  -> ``invalid_result`` (where ``output``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from toolproof.contract.tools import ToolAnnotations, ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureWhere
from toolproof.redaction import redact_url
from toolproof.sources.mcp.catalog import bind_catalog
from toolproof.sources.mcp.common import McpCallError, McpServer, McpStartError
from toolproof.sources.mcp.connection import McpConnection
from toolproof.sources.mcp.live import PINNED_EXTRAS, LiveGuard, duplicate_rule
from toolproof.tools.asking import ASKERS
from toolproof.tools.content import content_value
from toolproof.tools.declared import ToolContribution, bind_contributions
from toolproof.tools.filters import ToolFilter
from toolproof.tools.resources import FILTERS, MCP_LIVE, MCP_SERVERS
from toolproof.tools.toolset import Toolset

__all__ = ["McpServer", "bind_mcp_servers", "bound_name", "contribution_for", "result_value"]

logger = logging.getLogger("toolproof.mcp")

_ANNOTATION_KEYS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_FAILURE_KIND = {
    "transport": (FailureKind.TRANSPORT, FailureWhere.TRANSPORT, False),
    "timeout": (FailureKind.TIMEOUT, FailureWhere.TRANSPORT, True),
    "protocol": (FailureKind.TOOL_ERROR, FailureWhere.BODY, False),
    "invalid_result": (FailureKind.INVALID_RESULT, FailureWhere.OUTPUT, False),
    "cancelled": (FailureKind.CANCELLED, FailureWhere.BODY, False),  # the server's task
}


def _failure(
    kind: FailureKind, message: str, where: FailureWhere, retryable: bool, **detail: Any
) -> ToolCallError:
    return ToolCallError(
        ToolFailure(kind=kind, message=message, where=where, retryable=retryable, detail=detail)
    )


def result_value(result: dict[str, Any], *, server: str, tool: str, structured: bool) -> Any:
    """The JSON value of a ``tools/call`` result in wire form (see the module docstring).

    Args:
        result: the ``CallToolResult`` as camelCase JSON.
        server: the server's config name (for messages).
        tool: the server's tool name (for messages).
        structured: whether the tool declares an ``outputSchema``.

    Returns:
        ``structuredContent``, a string, or a content value
        (:func:`toolproof.tools.content.content_value`).

    Raises:
        ToolCallError: ``isError`` was true (failure kind ``tool_error``).

    """
    content = result.get("content") or []
    if result.get("isError"):
        texts = [block.get("text", "") for block in content if block.get("type") == "text"]
        text = "\n".join(texts) if texts else "(no text content)"
        raise _failure(
            FailureKind.TOOL_ERROR,
            f"MCP tool {tool!r} on server {server!r} reported an error: {text}",
            FailureWhere.BODY,
            False,
            server=server,
            tool=tool,
            content=content,
        )
    if structured and "structuredContent" in result:
        return result["structuredContent"]
    meta = result.get("_meta")
    if (
        len(content) == 1
        and content[0].keys() <= {"type", "text"}
        and content[0].get("type") == "text"
        and "structuredContent" not in result
        and not meta
    ):
        return content[0].get("text", "")
    return content_value(content, structured=result.get("structuredContent"), meta=meta)


def _annotations(tool: dict[str, Any]) -> ToolAnnotations | None:
    declared = tool.get("annotations") or {}
    hints = {key: declared[key] for key in _ANNOTATION_KEYS if key in declared}
    if "title" not in hints and isinstance(tool.get("title"), str):
        hints["title"] = tool["title"]
    return ToolAnnotations(**hints) if hints else None


def bound_name(server: McpServer, tool: str) -> str:
    """``<prefix>_<tool>``; the prefix is ``server.prefix``, else ``server.name``; ``""`` none."""
    prefix = server.name if server.prefix is None else server.prefix
    return f"{prefix}_{tool}" if prefix else tool


def contribution_for(
    connection: McpConnection, tool: dict[str, Any], guard: LiveGuard | None = None
) -> ToolContribution:
    """The :class:`ToolContribution` of one listed tool (wire form) of ``connection``.

    The contribution's name is ``<prefix>_<tool name>`` (or the bare name when the
    prefix is ``""``); its ``invoke`` sends the arguments unchanged to this server
    and this tool name, fixed now. With ``guard``, a later ``tools/list_changed`` that
    changes or drops this tool quarantines it (:mod:`toolproof.sources.mcp.live`).
    """
    server = connection.server
    raw = str(tool.get("name", ""))
    output_schema = tool.get("outputSchema")
    structured = output_schema is not None
    info = connection.initialize.get("serverInfo") or {}

    name = bound_name(server, raw)
    if guard is not None:
        guard.bind(name, tool)

    async def invoke(arguments: dict[str, Any]) -> Any:
        if guard is not None:
            await guard.admit(name)
        try:
            result = await connection.call_tool(raw, arguments)
        except McpCallError as exc:
            kind, where, retryable = _FAILURE_KIND[exc.kind]
            detail: dict[str, Any] = {"server": server.name, "tool": raw}
            if exc.code is not None:
                detail["code"] = exc.code
            if where == "transport" and server.command is not None:
                detail["stderr"] = connection.stderr()
            raise _failure(kind, str(exc), where, retryable, **detail) from exc
        return result_value(result, server=server.name, tool=raw, structured=structured)

    return ToolContribution(
        name=bound_name(server, raw),
        description=str(tool.get("description") or ""),
        input_schema=tool.get("inputSchema", {}),
        invoke=invoke,
        output_schema=output_schema,
        annotations=_annotations(tool),
        version=str(info.get("version") or "0"),
        source=f"mcp:{server.name}",
        deterministic=False,
        varies=("server",),
    )


def _record(toolset: Toolset, server: McpServer) -> dict[str, Any]:
    entries = toolset.resources.setdefault(MCP_SERVERS, dict)
    entry: dict[str, Any] = entries.setdefault(
        server.name, {"status": "starting", "tools": [], "list_changed": 0}
    )
    return entry


def _list_changed(toolset: Toolset, server: McpServer, guard: LiveGuard) -> None:
    entry = _record(toolset, server)
    entry["list_changed"] += 1
    if guard.watching:
        logger.warning(
            "MCP server %r sent notifications/tools/list_changed; re-listing its tools: a "
            "bound tool that changed is quarantined, new tools bind at the next load",
            server.name,
        )
    else:  # while starting: re-listed once its tools are bound (LiveGuard.watch)
        logger.debug(
            "MCP server %r sent notifications/tools/list_changed before its tools were "
            "bound; re-listing them once they are",
            server.name,
        )
    guard.changed()


async def bind_mcp_servers(toolset: Toolset, servers: Sequence[McpServer]) -> None:
    """Start every server concurrently and bind its tools into ``toolset``.

    Each session is closed when the Toolset closes (registered before it starts,
    so a cancelled or failed build leaves no process behind). ``servers[i]`` is
    reported as field ``mcp[i]``; ``toolset.resources[MCP_SERVERS][name]`` records the
    server's ``status`` (``ready``/``failed``), ``server_info``, ``protocol_version``,
    the bound ``tools`` and the count of ``list_changed`` notifications.

    Args:
        toolset: the open (unsealed) Toolset.
        servers: the servers, in config order.

    """
    connections: list[McpConnection] = []
    guards: dict[str, LiveGuard] = {}
    for server in servers:
        _record(toolset, server)
        guards[server.name] = guard = LiveGuard(server.name)
        toolset.resources.setdefault(MCP_LIVE, dict)[server.name] = guard
        connection = McpConnection(
            server,
            partial(_list_changed, toolset, server, guard),
            toolset.catalog.publish,
            toolset.resources.get(ASKERS),
        )
        guard.connection = connection
        toolset.on_close(connection.aclose)
        connections.append(connection)
    outcomes = await asyncio.gather(*(c.start() for c in connections), return_exceptions=True)
    for index, (connection, outcome) in enumerate(zip(connections, outcomes, strict=True)):
        server = connection.server
        entry = _record(toolset, server)
        entry["transport"] = (
            {"command": [server.command, *server.args]}
            if server.command is not None
            else {"url": redact_url(server.url or "")}
        )
        owner = f"mcp:{server.name}"
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, McpStartError):
                raise outcome
            entry["status"] = "failed"
            logger.warning("MCP server %r not started: %s", server.name, outcome)
            rule = f"MCP server {server.name!r}: {outcome}"
            toolset.quarantine(server.name, f"mcp[{index}]", rule, owner=owner)
            continue
        entry.update(
            status="ready",
            server_info=connection.initialize.get("serverInfo"),
            protocol_version=connection.initialize.get("protocolVersion"),
            skipped=list(connection.skipped),
        )
        if connection.skipped:
            logger.info(
                "MCP server %r does not serve %s (-32601, method not found); skipped",
                server.name,
                ", ".join(connection.skipped),
            )
        chosen = ToolFilter(owner, server.include, server.exclude)
        offered = [str(tool.get("name", "")) for tool in connection.tools]
        kept = set(chosen.select(offered))
        if chosen.active:
            toolset.resources.setdefault(FILTERS, list).append(chosen.to_json())
        contributions = []
        listed = Counter(offered)
        for raw, count in sorted(listed.items()):
            if count > 1 and raw in kept:
                toolset.quarantine(
                    bound_name(server, raw),
                    "name",
                    duplicate_rule(server.name, raw, count),
                    owner=owner,
                )
        for tool in connection.tools:
            if str(tool.get("name", "")) not in kept or listed[str(tool.get("name", ""))] > 1:
                continue
            try:
                contributions.append(contribution_for(connection, tool, guards[server.name]))
            except ValidationError as exc:  # annotations our model cannot hold
                name = bound_name(server, str(tool.get("name", "")))
                problem = exc.errors(include_url=False)[0]["msg"]
                toolset.quarantine(name, "annotations", problem, owner=owner)
        bound = bind_contributions(toolset, contributions, owner=owner)
        guards[server.name].watch()
        prefix = server.name if server.prefix is None else server.prefix
        bind_catalog(toolset.catalog, connection, prefix)
        entry["tools"] = [tool.name for tool in bound]
        entry["names"] = {
            bound_name(server, str(tool.get("name", ""))): str(tool.get("name", ""))
            for tool in connection.tools
        }
        entry["pinned"] = {  # what the lock pins beyond the ToolSpec
            bound_name(server, str(tool.get("name", ""))): {
                key: tool[key] for key in PINNED_EXTRAS if key in tool
            }
            for tool in connection.tools
            if listed[str(tool.get("name", ""))] == 1
        }
