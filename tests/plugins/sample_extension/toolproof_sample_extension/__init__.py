"""A user's wrapper in its own package: upper-cases string results."""

from typing import Any

import toolproof


@toolproof.wrapper(name="shout", version="1")
async def shout(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
    """Upper-case a string result; anything else passes through."""
    result = await call_next(arguments)
    if result.ok and isinstance(result.value, str):
        return toolproof.ToolResult.success(result.value.upper())
    return result
