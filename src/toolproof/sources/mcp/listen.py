"""Change notifications from a 2026-07-28 server: ``subscriptions/listen`` streams.

A 2025-11-25 server sends ``notifications/*/list_changed`` on its own and answers
``resources/subscribe``; the 2026-07-28 revision removed both: a client opens a
``subscriptions/listen`` request whose response is the stream of the events it asked
for. :class:`Listening` keeps those streams (the SDK's ``Client.listen``) for one
connection: one for the list changes the server announces, opened at start, and one
per subscribed resource URI. Their notifications reach the connection's message
handler as a 2025-11-25 server's do, so the Toolset, the lock guard and ``toolproof
serve`` see the same thing over both revisions.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import Any

from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from toolproof.sources.mcp.common import SDK_ERRORS

__all__ = ["Listening"]

logger = logging.getLogger("toolproof.mcp")


class Listening:
    """The ``subscriptions/listen`` streams of one connection (2026-07-28 only).

    Args:
        name: the server's config name (for messages).

    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._streams: dict[str, AsyncExitStack] = {}  # "" (list changes) or a resource URI

    @staticmethod
    def modern(client: Any) -> bool:
        """Whether ``client`` (an entered ``mcp.Client``) settled on a 2026-era revision."""
        return client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def list_changes(self, client: Any, capabilities: dict[str, Any]) -> None:
        """Listen for the list changes ``capabilities`` announce (``listChanged``).

        Nothing on a 2025-11-25 connection, or when nothing is announced. A server that
        refuses the stream still serves its tools: logged at INFO, not raised.
        """
        if not self.modern(client):
            return
        wanted = {
            f"{kind}_list_changed": bool((capabilities.get(kind) or {}).get("listChanged"))
            for kind in ("tools", "prompts", "resources")
        }
        if not any(wanted.values()):
            return
        try:
            await self._open("", client.listen(**wanted))
        except SDK_ERRORS as exc:
            logger.info(
                "MCP server %r refused subscriptions/listen (%s); its list changes are not "
                "followed",
                self.name,
                exc,
            )

    async def watch(self, client: Any, uri: str, on: bool) -> None:
        """Start (``on``) or stop following ``notifications/resources/updated`` of ``uri``.

        Raises:
            Exception: the SDK's JSON-RPC error when the server refuses the stream.

        """
        if not on:
            stack = self._streams.pop(uri, None)
            if stack is not None:
                await stack.aclose()
            return
        if uri not in self._streams:
            await self._open(uri, client.listen(resource_subscriptions=[uri]))

    async def _open(self, key: str, stream: Any) -> None:
        stack = AsyncExitStack()
        await stack.enter_async_context(stream)
        self._streams[key] = stack

    async def aclose(self) -> None:
        """End every stream (the server sees each listen request closed)."""
        streams, self._streams = self._streams, {}
        for stack in streams.values():
            await stack.aclose()
