"""Resources and prompts beside the tools: what ``toolproof serve`` lists, reads and gets.

A :class:`Catalog` (``toolset.catalog``) holds MCP resources, resource templates and
prompts, each in MCP wire form (camelCase JSON) with the async function that answers
it, from two sources:

* ``[[mcp]]`` imports: every resource, template and prompt a server lists; a prompt
  is named ``<prefix>_<name>`` like a tool (a resource's URI is its identity and is
  kept; its ``name`` gets the prefix); reads, gets, completions and subscriptions go
  to that server;
* ``[[python]]`` modules: functions marked ``@toolproof.resource(uri)`` and
  ``@toolproof.prompt`` (:mod:`toolproof.tools.python_catalog`).

A source's change notifications (``notifications/resources/updated`` and the
``list_changed`` ones of tools, resources and prompts) are published to the
catalog's :attr:`Catalog.listeners`; ``toolproof serve`` listens and relays them to
its clients (:mod:`toolproof.adapters.mcp.relay`).

A URI or prompt name listed twice keeps the first entry; the second is logged on
``toolproof.mcp`` and dropped. Templates are RFC 6570 level 1 (``{name}`` matches one
or more characters other than ``/``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NOTICES", "Catalog", "Entry", "Listener", "template_match"]

logger = logging.getLogger("toolproof.mcp")

Answer = Callable[..., Awaitable[dict[str, Any]]]
"""An async function answering in MCP wire form."""

Listener = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``async listener(method, params)``: told about a source's change notification."""

NOTICES = frozenset(
    {
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
        "notifications/tools/list_changed",
    }
)
"""The notifications of an imported server that the catalog publishes."""


def template_match(template: str, uri: str) -> dict[str, str] | None:
    """The variables of ``uri`` under the level-1 URI template, or ``None`` when it differs."""
    parts = re.split(r"\{([A-Za-z0-9_]+)\}", template)
    pattern = "".join(
        re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)"
        for index, part in enumerate(parts)
    )
    found = re.fullmatch(pattern, uri)
    return found.groupdict() if found else None


@dataclass(frozen=True)
class Entry:
    """One listed item and what answers it.

    Attributes:
        listing: the MCP wire form of the ``Resource``, ``ResourceTemplate`` or ``Prompt``.
        answer: ``read(uri)`` for resources and templates, ``get(arguments)`` for prompts.
        owner: who contributed it (``mcp:<name>``, ``python:<module>``).
        complete: ``complete(ref, argument, context)`` (wire forms), or ``None``.
        subscribe: ``subscribe(uri, on)`` forwarding (un)subscriptions, or ``None``.

    """

    listing: dict[str, Any]
    answer: Answer
    owner: str
    complete: Answer | None = None
    subscribe: Callable[[str, bool], Awaitable[None]] | None = None


@dataclass
class Catalog:
    """The resources, templates and prompts of a Toolset (see the module docstring)."""

    resources: dict[str, Entry] = field(default_factory=dict)
    templates: dict[str, Entry] = field(default_factory=dict)
    prompts: dict[str, Entry] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        """Tell every listener about a source's notification (one of :data:`NOTICES`).

        Args:
            method: the notification's method.
            params: its params in wire form (``{"uri": ...}`` for ``resources/updated``).

        """
        for listener in list(self.listeners):
            await listener(method, params)

    def _add(self, table: dict[str, Entry], key: str, entry: Entry, what: str) -> None:
        if key in table:
            logger.warning(
                "%s %r from %s is already listed by %s; the first is kept",
                what,
                key,
                entry.owner,
                table[key].owner,
            )
            return
        table[key] = entry

    def add_resource(self, entry: Entry) -> None:
        """List a resource (keyed by its ``uri``)."""
        self._add(self.resources, str(entry.listing["uri"]), entry, "resource")

    def add_template(self, entry: Entry) -> None:
        """List a resource template (keyed by its ``uriTemplate``)."""
        self._add(self.templates, str(entry.listing["uriTemplate"]), entry, "resource template")

    def add_prompt(self, entry: Entry) -> None:
        """List a prompt (keyed by its ``name``)."""
        self._add(self.prompts, str(entry.listing["name"]), entry, "prompt")

    def resource_for(self, uri: str) -> Entry | None:
        """The entry that reads ``uri``: the resource itself, else the first matching template."""
        entry = self.resources.get(uri)
        if entry is not None:
            return entry
        for template, candidate in self.templates.items():
            if template_match(template, uri) is not None:
                return candidate
        return None

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates or self.prompts)
