"""Live re-listings: re-list, diff, quarantine changed tools at once.

When a connected server says its tool list changed (``notifications/tools/list_changed``),
or a 2026-07-28 server's last ``tools/list`` is past its ``ttlMs`` when one of its tools
is called (:class:`~toolproof.sources.mcp.catalog.Freshness`: ``ttlMs: 0``, the default,
means every call), :class:`LiveGuard` lists its tools
again and compares each bound tool's definition (``name``, ``title``, ``description``,
``inputSchema``, ``outputSchema``, ``annotations``, ``_meta``, ``icons``, as the server
lists them) with the one it was bound with, which loading already checked against
``toolproof.lock``. A tool whose definition changed, that the server no longer lists,
or that it now lists more than once (the load-time rule: a duplicated name binds
nothing) stops answering; a tool listed under a new name with the same definition is
reported as ``renamed`` (the lock pins names: a renamed tool is drift too):
every later call fails (kind ``unavailable``) naming the diff, by JSON pointer. Calls
made while the re-listing is under way wait for it. Unchanged tools keep working; a
newly listed tool is not bound (it binds, or is quarantined by the lock, at the next
load).

A notification that arrives before the server's tools are bound (some servers send one
while starting) is remembered, and the tools are re-listed once, right after binding
(:meth:`LiveGuard.watch`). A re-listing that fails quarantines the bound tools and says
so by name; one that fails because the Toolset is closing quarantines nothing and says
nothing: a warning is logged only for a tool that really stopped answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.tools import ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureWhere
from toolproof.sources.mcp.common import McpCallError
from toolproof.sources.mcp.connection import McpConnection
from toolproof.tools.lock import diff_json

__all__ = ["PINNED_EXTRAS", "WIRE_FIELDS", "LiveGuard", "duplicate_rule"]

logger = logging.getLogger("toolproof.mcp")

PINNED_EXTRAS = ("_meta", "icons")
"""Fields of a listed tool that the lock pins beside its spec (:mod:`toolproof.tools.lock`)."""
WIRE_FIELDS = (
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    *PINNED_EXTRAS,
)
"""The fields of a listed tool that a live re-listing compares."""


def duplicate_rule(server: str, tool: str, count: int) -> str:
    """Why a tool name a server lists ``count`` (> 1) times binds under no definition."""
    return (
        f"MCP server {server!r} lists the tool {tool!r} {count} times (rule: a server's tool "
        "names are unique; which definition tools/call would run is ambiguous, so none binds)"
    )


def _definition(tool: dict[str, Any]) -> dict[str, Any]:
    return {key: tool[key] for key in WIRE_FIELDS if key in tool}


@dataclass
class LiveGuard:
    """The live state of one server's bound tools.

    Attributes:
        server: the server's config name.
        bound: bound name -> the server's tool name.
        definitions: the server's tool name -> its definition when it was bound.
        revoked: bound name -> why it stopped answering (the diff).
        drift: what each re-listing found, as JSON (``[{"name", "kind", "changes"}]``;
            kind ``changed``, ``vanished``, ``duplicated`` or ``renamed``, with ``to``).
        why: bound name -> what made the re-listing that quarantined it.
        connection: the server's connection (set once it is created).
        watching: its tools are bound (:meth:`watch`); a notification before that is
            remembered and re-checked then.

    """

    server: str
    bound: dict[str, str] = field(default_factory=dict)
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    revoked: dict[str, str] = field(default_factory=dict)
    drift: list[dict[str, Any]] = field(default_factory=list)
    connection: McpConnection | None = None
    watching: bool = False
    why: dict[str, str] = field(default_factory=dict)
    _early: bool = False
    _pending: asyncio.Task[None] | None = None

    def bind(self, name: str, tool: dict[str, Any]) -> None:
        """Remember the definition the tool ``name`` was bound with."""
        raw = str(tool.get("name", ""))
        self.bound[name] = raw
        self.definitions[raw] = _definition(tool)

    def watch(self) -> None:
        """The server's tools are bound: re-list now if a ``list_changed`` came before."""
        self.watching = True
        if self._early:
            self._early = False
            self.changed()

    def changed(self) -> None:
        """Schedule a re-listing (called for each ``list_changed``, in the receive loop).

        Before :meth:`watch` the notification is only remembered (the definitions it would
        be compared with are not bound yet).
        """
        connection = self.connection
        if connection is None:
            return
        if not self.watching:
            self._early = True
            return
        self._relist(connection, "notifications/tools/list_changed")

    def _relist(self, connection: McpConnection, trigger: str) -> None:
        previous = self._pending
        self._pending = asyncio.get_running_loop().create_task(
            self._recheck(connection, previous, trigger), name=f"toolproof-relist-{self.server}"
        )

    async def _recheck(
        self, connection: McpConnection, previous: asyncio.Task[None] | None, trigger: str
    ) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            relisted = await connection.relist()
        except McpCallError as exc:
            why = f"re-listing after {trigger} failed: {exc}"
            if connection.closing:  # the Toolset is closing: no tool will be called again
                logger.debug("MCP server %r: %s (while closing)", self.server, why)
                return
            lost = sorted(name for name in self.bound if name not in self.revoked)
            for name in lost:
                self.revoked[name], self.why[name] = why, trigger
            if lost:
                logger.warning(
                    "MCP server %r: %s; quarantined %s", self.server, why, ", ".join(lost)
                )
            return
        listed = {str(tool.get("name", "")): tool for tool in relisted}
        counts = Counter(str(tool.get("name", "")) for tool in relisted)
        for name, raw in self.bound.items():
            if name in self.revoked:
                continue
            self.why[name] = trigger
            if counts[raw] > 1:  # the same rule as at load: a duplicated name binds nothing
                self.revoked[name] = duplicate_rule(self.server, raw, counts[raw])
                self.drift.append({"name": name, "kind": "duplicated", "changes": []})
                continue
            if raw not in listed:
                renamed = self._renamed(raw, listed)
                if renamed is not None:
                    self.revoked[name] = f"the server renamed it to {renamed!r}"
                    self.drift.append(
                        {"name": name, "kind": "renamed", "changes": [], "to": renamed}
                    )
                    continue
                self.revoked[name] = "the server no longer lists it"
                self.drift.append({"name": name, "kind": "vanished", "changes": []})
                continue
            changes = diff_json(self.definitions[raw], _definition(listed[raw]))
            if changes:
                self.revoked[name] = "; ".join(str(change) for change in changes)
                self.drift.append(
                    {"name": name, "kind": "changed", "changes": [c.to_json() for c in changes]}
                )
        if self.revoked:
            logger.warning(
                "MCP server %r changed its tools (%s): quarantined %s",
                self.server,
                trigger,
                ", ".join(sorted(self.revoked)),
            )

    def _renamed(self, raw: str, listed: dict[str, dict[str, Any]]) -> str | None:
        """The one new name the server lists ``raw``'s definition under, or ``None``."""
        old = {k: v for k, v in self.definitions[raw].items() if k != "name"}
        news = [
            new
            for new, tool in listed.items()
            if new not in self.definitions
            and {k: v for k, v in _definition(tool).items() if k != "name"} == old
        ]
        return news[0] if len(news) == 1 else None

    async def admit(self, name: str) -> None:
        """Wait for a re-listing under way; refuse ``name`` when it was quarantined.

        Raises:
            ToolCallError: failure kind ``unavailable`` naming the server and the diff.

        """
        pending = self._pending
        connection = self.connection
        idle = pending is None or pending.done()
        if idle and self.watching and connection is not None and connection.freshness.stale():
            self._relist(connection, "its tools/list was past its ttlMs")
            pending = self._pending
        if pending is not None and not pending.done():
            await asyncio.shield(pending)
        why = self.revoked.get(name)
        if why is None:
            return
        raise ToolCallError(
            ToolFailure(
                kind=FailureKind.UNAVAILABLE,
                message=(
                    f"tool {name!r} is quarantined: MCP server {self.server!r} changed it after "
                    f"it was bound ({self.why.get(name, 'notifications/tools/list_changed')}): "
                    f"{why}; reload the tools and review the change (toolproof lock --check, "
                    "then --update)"
                ),
                where=FailureWhere.TRANSPORT,
                retryable=False,
                detail={"server": self.server, "tool": self.bound[name]},
            )
        )
