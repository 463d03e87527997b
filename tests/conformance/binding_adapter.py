"""The toolproof adapter of the declared-tool binding conformance suite.

Contract (``tests/conformance/README.md``): ``bind(declaration, invoke)`` returns a
callable; ``await fn(arguments)`` returns what ``invoke`` returned. Binding goes
through :func:`toolproof.bind_contribution` (a refused declaration raises
``ToolBindError``); a call goes through ``Tool.call`` and ``ToolResult.unwrap()``, so
refused arguments raise ``ToolCallError`` without calling ``invoke``.

Run by ``tests/conformance/harness.py`` (``pytest tests/conformance``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolproof import Tool, ToolContribution, bind_contribution


def declared_tool(
    declaration: dict[str, Any], invoke: Callable[[dict[str, Any]], Awaitable[Any]]
) -> Tool:
    """The suite's declaration bound as a toolproof :class:`Tool`."""
    return bind_contribution(
        ToolContribution(
            name=declaration.get("name", ""),
            description=declaration.get("description", ""),
            input_schema=declaration.get("input_schema"),
            invoke=invoke,
        )
    )


def bind(
    declaration: dict[str, Any], invoke: Callable[[dict[str, Any]], Awaitable[Any]]
) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """Bind one declaration; return ``async fn(arguments) -> invoke's result``."""
    tool = declared_tool(declaration, invoke)

    async def call(arguments: dict[str, Any]) -> Any:
        return (await tool.call(arguments)).unwrap()

    return call
