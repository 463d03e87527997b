"""Tools for the toolproof.toml extension tests."""

from __future__ import annotations

import toolproof


@toolproof.tool(read_only=True, version="2")
async def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@toolproof.tool
async def write_note(text: str) -> str:
    """Write a note (neither read-only nor idempotent)."""
    return text


@toolproof.tool(name="my-tool", idempotent=True)
async def my_tool(x: int) -> int:
    """Double x."""
    return 2 * x


@toolproof.tool
def spread(*values: int) -> int:
    """Cannot be bound: bare *args."""
    return sum(values)
