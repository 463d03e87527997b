"""The tool bodies ``bench_extensions.py`` and ``count_extensions.py`` both measure.

Not a benchmark: a module the two import, so the microsecond figures and the
instruction counts are of the same functions.
"""

from __future__ import annotations

import asyncio
from typing import Any

ARGS = {"a": 1, "b": 2}
"""The arguments of every measured call."""


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_suspending(a: int, b: int) -> int:
    """Add two integers after yielding to the event loop once."""
    await asyncio.sleep(0)
    return a + b


async def add_invoke(arguments: dict[str, Any]) -> Any:
    """The same function as a declared tool's ``invoke`` (the schema already checked types)."""
    return await add(**arguments)
