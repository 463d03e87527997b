"""An extension module listed in [extensions] modules."""

from __future__ import annotations

from typing import Any

import toolproof


@toolproof.wrapper(name="fixture_double")
async def fixture_double(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
    """Double an integer result."""
    result = await call_next(arguments)
    return result.value * 2 if result.ok else result
