"""``timeout``: cancel the body after a time limit; a caller may lower it with ``timeout_s``."""

from __future__ import annotations

import asyncio
from typing import Any

from toolproof.contract.bounds import Seconds
from toolproof.contract.tools import ToolResult
from toolproof.extensions.layer import call_next_for
from toolproof.extensions.wrappers.common import StrictConfig, wrapper_spec
from toolproof.tools.tool import Tool

__all__ = ["TIMEOUT_RESERVED", "TimeoutConfig", "timeout_factory"]

TIMEOUT_RESERVED = {
    "timeout_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "Lower this call's time limit, in seconds (at most the configured limit).",
    }
}
"""The reserved param of ``timeout``: ``timeout_s`` (seconds, > 0)."""


class TimeoutConfig(StrictConfig):
    """Config of ``timeout``.

    Attributes:
        seconds: the time limit of one call, in seconds (> 0).

    """

    seconds: Seconds


def timeout_factory(inner: Tool, *, name: str, config: Any) -> Tool:
    """Build the ``timeout`` variant of ``inner``.

    The inner call is cancelled (``asyncio.timeout``) when the limit passes and the
    call fails with kind ``timeout`` (retryable, ``where="wrapper"``). ``timeout_s``
    lowers the limit for one call, never raises it. An outer cancellation propagates.
    """
    cfg: TimeoutConfig = config
    call_next = call_next_for(inner, TIMEOUT_RESERVED)

    async def body(arguments: dict[str, Any]) -> ToolResult:
        limit = cfg.seconds
        asked = arguments.get("timeout_s")
        if asked is not None and asked < limit:
            limit = float(asked)
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await call_next(arguments)
        except TimeoutError:
            if not scope.expired():
                raise
            return ToolResult.fail(
                "timeout",
                f"tool {name!r} timed out after {limit:g} s (the body was cancelled)",
                where="wrapper",
                retryable=True,
                detail={"seconds": limit},
            )

    return Tool(wrapper_spec(inner, name, TIMEOUT_RESERVED), body)
