"""A small typed file exercising the public API; `mypy --strict` checks it in CI."""

from __future__ import annotations

import toolproof
from toolproof import Tool, ToolResult, Toolset


@toolproof.tool(read_only=True)
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


async def use() -> int:
    tool: Tool = Tool.from_function(add)
    toolset = Toolset()
    toolset.add(tool)
    toolset.seal()
    result: ToolResult = await toolset["add"].call({"a": 1})
    value = result.unwrap()
    assert isinstance(value, int)
    digest: str = toolset.descriptor().digest
    assert digest.startswith("sha256:")
    canonical: bytes = toolproof.canonical_json({"b": 1, "a": [1.5, None]})
    return len(canonical) + value
