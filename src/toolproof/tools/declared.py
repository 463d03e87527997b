"""Declared tools (seed 003): a ``ToolContribution`` bound by its JSON Schema.

A contribution carries a name, a description, a declared ``input_schema`` and an
async ``invoke(arguments)``; :func:`bind_contribution` turns it into a :class:`Tool`
once, at the composition root. The body receives exactly the caller's JSON.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.tools import ToolAnnotations, ToolSpec
from toolproof.errors import ToolBindError, ToolNameError
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = ["ToolContribution", "bind_contribution", "bind_contributions"]

Invoke = Callable[[dict[str, Any]], Awaitable[Any]]
"""``async invoke(arguments) -> str | JSON``."""


@dataclass(frozen=True)
class ToolContribution:
    """A tool declared by JSON Schema: what an MCP server or a plugin offers.

    Attributes:
        name: the tool name.
        description: what the tool does.
        input_schema: the JSON Schema of the arguments object (deep-copied at bind time).
        invoke: ``async invoke(arguments: dict) -> str | JSON``; captured at bind time.
        output_schema: the JSON Schema of the result value, or ``None``.
        annotations: MCP tool annotations, when declared.
        version: the tool's version.
        source: where it came from (``mcp:git``, ``plugin:pkg``), for descriptors and errors.
        deterministic: False when identical calls may give different results.
        varies: what varies when not deterministic.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any] | bool
    invoke: Invoke
    output_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    version: str = "0"
    source: str = ""
    deterministic: bool = True
    varies: tuple[str, ...] = field(default=())


def bind_contribution(contribution: ToolContribution) -> Tool:
    """Bind a :class:`ToolContribution` as a validated :class:`Tool`.

    Args:
        contribution: the declaration.

    Returns:
        The tool; calling it validates the arguments with the compiled draft 2020-12
        validator and hands ``invoke`` exactly the caller's object.

    Raises:
        ToolBindError: the declaration cannot be bound faithfully; names the tool,
            the field and the rule.
    """
    name = contribution.name
    schema = copy.deepcopy(contribution.input_schema)
    if not isinstance(schema, dict):
        raise ToolBindError(name, "input_schema", "must be a JSON Schema object")
    output = copy.deepcopy(dict(contribution.output_schema)) if contribution.output_schema else None
    spec = ToolSpec(
        name=name,
        version=contribution.version,
        description=contribution.description,
        input_schema=schema,
        output_schema=output,
        annotations=contribution.annotations or ToolAnnotations(),
    )
    invoke = contribution.invoke

    async def body(arguments: dict[str, Any]) -> Any:
        return await invoke(arguments)

    return Tool(
        spec,
        body,
        source=contribution.source,
        deterministic=contribution.deterministic,
        varies=contribution.varies,
    )


def bind_contributions(
    toolset: Toolset, contributions: Iterable[ToolContribution], *, owner: str
) -> list[Tool]:
    """Bind each contribution into ``toolset``; quarantine each that cannot be bound.

    Returns:
        The tools that were added, in order.
    """
    added: list[Tool] = []
    for contribution in contributions:
        try:
            added.append(toolset.add(bind_contribution(contribution), owner=owner))
        except ToolBindError as exc:
            toolset.quarantine(
                contribution.name, exc.fields["field"], exc.fields["rule"], owner=owner
            )
        except ToolNameError as exc:
            toolset.quarantine(contribution.name, "name", exc.fields["rule"], owner=owner)
    return added
