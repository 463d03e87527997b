"""An MCP server's resources, resource templates and prompts, imported into a Catalog.

:func:`list_catalog` lists them at start (only what the server's ``initialize``
capabilities announce; ``nextCursor`` followed; a listing the server answers with
``-32601``, method not found, is skipped); :func:`bind_catalog` adds them to
``toolset.catalog`` (:mod:`toolproof.tools.catalog`): a prompt is named
``<prefix>_<name>`` like a tool, a resource keeps its URI (its ``name`` gets the
prefix), and reads, gets, completions and (un)subscriptions go to the same server,
with the original names, each within ``call_timeout``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolproof.sources.mcp.common import METHOD_NOT_FOUND, SDK_ERRORS, error_code, wire
from toolproof.tools.catalog import Catalog, Entry

__all__ = ["MAX_LIST_PAGES", "Freshness", "bind_catalog", "list_catalog", "list_tools"]

MAX_PAGES = 1000
"""List pages followed before the listing stops (a cursor that never ends)."""
MAX_LIST_PAGES = 1000
"""``tools/list`` pages followed before a server is refused (a cursor that never ends)."""
_LISTS = {  # listing -> (capability, SDK method, result key, MCP method)
    "resources": ("resources", "list_resources", "resources", "resources/list"),
    "templates": (
        "resources",
        "list_resource_templates",
        "resourceTemplates",
        "resources/templates/list",
    ),
    "prompts": ("prompts", "list_prompts", "prompts", "prompts/list"),
}


@dataclass
class Freshness:
    """How long a server's last ``tools/list`` stays fresh (2026-07-28 caching hints, SEP-2549).

    ``ttl``: seconds from ``listed_at`` (``time.monotonic()``) the server lets its listing
    be used (its ``ttlMs``; the least over the pages), or ``None`` when it sent no hint (a
    2025-11-25 server: ``notifications/tools/list_changed`` tells of a change instead).
    ``scope``: its ``cacheScope`` (``private`` or ``public``). A listing is never shared
    between connections, so it is reused only by the authorization context that got it,
    which honours both scopes.
    """

    listed_at: float | None = None
    ttl: float | None = None
    scope: str | None = None

    def note(self, result: Any, first: bool) -> None:
        """Take the hints of one page (``first``: a new listing starts now)."""
        fields: set[str] = getattr(result, "model_fields_set", set())
        ttl = result.ttl_ms / 1000 if "ttl_ms" in fields else None
        if first:
            self.listed_at, self.ttl = time.monotonic(), ttl
            self.scope = getattr(result, "cache_scope", None) if "cache_scope" in fields else None
        elif ttl is not None:
            self.ttl = ttl if self.ttl is None else min(self.ttl, ttl)

    def stale(self) -> bool:
        """Whether the listing's ``ttlMs`` has run out (never without a hint)."""
        if self.ttl is None or self.listed_at is None:
            return False
        return time.monotonic() >= self.listed_at + self.ttl


async def list_tools(session: Any, freshness: Freshness | None = None) -> list[dict[str, Any]]:
    """Every tool the server lists (wire form), following ``nextCursor``.

    ``freshness`` (when given) takes the listing's caching hints.

    Raises:
        RuntimeError: the listing did not end after :data:`MAX_LIST_PAGES` pages.
        Exception: the SDK's JSON-RPC or transport error.

    """
    types: Any = importlib.import_module("mcp.types")
    tools: list[dict[str, Any]] = []
    result: Any = await session.list_tools()
    for page in range(MAX_LIST_PAGES):
        if freshness is not None:
            freshness.note(result, page == 0)
        tools.extend(wire(tool) for tool in result.tools)
        cursor = getattr(result, "next_cursor", getattr(result, "nextCursor", None))
        if not cursor:
            return tools
        if hasattr(types, "PaginatedRequestParams"):
            result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        else:  # 1.x
            result = await session.list_tools(cursor)
    raise RuntimeError(f"tools/list did not end after {MAX_LIST_PAGES} pages")


async def _pages(session: Any, method: str, key: str) -> list[dict[str, Any]]:
    types: Any = importlib.import_module("mcp.types")
    items: list[dict[str, Any]] = []
    params = None
    for _ in range(MAX_PAGES):
        result = wire(await getattr(session, method)(params=params))
        items.extend(result.get(key, []))
        cursor = result.get("nextCursor")
        if not cursor:
            break
        params = types.PaginatedRequestParams(cursor=cursor)
    return items


async def list_catalog(
    session: Any, initialize: dict[str, Any], enter: Callable[[str], None] | None = None
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """What the server lists, and the optional list methods it lacks.

    Only what the ``initialize`` capabilities announce is listed. A listing the server
    answers with JSON-RPC ``-32601`` (method not found: it announced ``resources`` but
    serves no ``resources/templates/list``, say) is optional and skipped: that listing is
    empty and its MCP method is returned in the second item.

    Args:
        session: the SDK's client session, initialized.
        initialize: the ``initialize`` result, wire form.
        enter: called with each MCP method before it is sent (``resources/list``...), so a
            failure can name it.

    Returns:
        ``({"resources", "templates", "prompts"}`` -> items in wire form``, [skipped MCP
        methods])``.

    Raises:
        Exception: the SDK's JSON-RPC error for any other error answer, or a transport error.

    """
    capabilities = initialize.get("capabilities") or {}
    listed: dict[str, list[dict[str, Any]]] = {}
    skipped: list[str] = []
    for name, (capability, method, key, mcp_method) in _LISTS.items():
        listed[name] = []
        if capability not in capabilities:
            continue
        if enter is not None:
            enter(mcp_method)
        try:
            listed[name] = await _pages(session, method, key)
        except SDK_ERRORS as exc:
            if error_code(exc) != METHOD_NOT_FOUND:
                raise
            skipped.append(mcp_method)
    return listed, skipped


def _prefixed(prefix: str, name: str) -> str:
    return f"{prefix}_{name}" if prefix else name


def bind_catalog(catalog: Catalog, connection: Any, prefix: str) -> None:
    """Add the resources, templates and prompts ``connection`` listed to ``catalog``.

    Args:
        catalog: the Toolset's catalog.
        connection: a started :class:`~toolproof.sources.mcp.connection.McpConnection`.
        prefix: the tool prefix of the server (``""``: names kept).

    """
    owner = f"mcp:{connection.server.name}"
    types: Any = importlib.import_module("mcp.types")

    async def read(uri: str) -> dict[str, Any]:
        return await connection.request("resources/read", lambda s: s.read_resource(uri))  # type: ignore[no-any-return]

    async def complete(
        ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None
    ) -> dict[str, Any]:
        if ref.get("type") == "ref/prompt":
            model: Any = types.PromptReference(name=names.get(ref["name"], ref["name"]))
        else:
            model = types.ResourceTemplateReference(uri=ref["uri"])

        async def send(session: Any) -> Any:
            return await session.complete(model, argument, (context or {}).get("arguments"))

        return await connection.request("completion/complete", send)  # type: ignore[no-any-return]

    async def subscribe(uri: str, on: bool) -> None:
        await connection.subscribe(uri, on)

    names: dict[str, str] = {}  # prompt name served -> the server's own
    listings = connection.listings
    for resource in listings.get("resources", []):
        listing = {**resource, "name": _prefixed(prefix, str(resource.get("name", "")))}
        catalog.add_resource(Entry(listing, read, owner, complete, subscribe))
    for template in listings.get("templates", []):
        listing = {**template, "name": _prefixed(prefix, str(template.get("name", "")))}
        catalog.add_template(Entry(listing, read, owner, complete, subscribe))
    for prompt in listings.get("prompts", []):
        raw = str(prompt.get("name", ""))
        served = _prefixed(prefix, raw)
        names[served] = raw

        async def get(arguments: dict[str, str] | None, raw: str = raw) -> dict[str, Any]:
            return await connection.request(  # type: ignore[no-any-return]
                "prompts/get", lambda s: s.get_prompt(raw, arguments)
            )

        catalog.add_prompt(Entry({**prompt, "name": served}, get, owner, complete))
