"""The declared-tool API, typed: `mypy --strict` checks it in CI."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolproof import (
    SchemaLimits,
    Tool,
    ToolContribution,
    ToolResult,
    Toolset,
    bind_contribution,
    declarable_field,
)
from toolproof.adapters.frameworks.callable import OMITTED, as_callable
from toolproof.adapters.frameworks.langchain import ToolproofStructuredTool, as_structured_tool
from toolproof.tools.declared import bind_contributions


async def invoke(arguments: dict[str, Any]) -> str:
    return str(arguments)


async def use() -> bool:
    contribution = ToolContribution("echo", "Echo.", {"type": "object"}, invoke)
    tool: Tool = bind_contribution(contribution, limits=SchemaLimits(max_depth=16))
    toolset = Toolset()
    added: list[Tool] = bind_contributions(toolset, [contribution], owner="plugin:demo")
    result: ToolResult = await tool.call({})
    structured: ToolproofStructuredTool = as_structured_tool(tool)
    fn: Callable[..., Awaitable[Any]] = as_callable(tool)
    omitted: object = OMITTED
    named = declarable_field("x") and structured.name == "echo" and callable(fn)
    return bool(added) and result.ok and named and omitted is not None
