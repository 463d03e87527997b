"""``timeout``: cancel the body after a time limit; a caller may lower it with ``timeout_s``."""

from __future__ import annotations

import asyncio
from typing import Any

from toolproof.contract.bounds import Seconds
from toolproof.contract.tools import ToolResult
from toolproof.extensions.schema import is_flat_object_schema
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

    The inner call runs under ``asyncio.timeout``: when the limit passes the call is
    cancelled and fails with kind ``timeout`` (retryable, ``where="wrapper"``); a body
    that swallows the cancellation and returns keeps its result. The limit counts from
    the call's start (its first step included). ``timeout_s`` lowers the limit for one
    call, never raises it, and is not passed inward. An outer cancellation propagates.
    """
    cfg: TimeoutConfig = config
    seconds = float(cfg.seconds)
    # flat: the inner layer takes the arguments as validated here, else it validates again
    run = inner.run_validated if is_flat_object_schema(inner.spec.input_schema) else inner.call

    async def body(arguments: dict[str, Any]) -> ToolResult:
        limit = seconds
        if "timeout_s" in arguments:
            asked = arguments["timeout_s"]
            arguments = {k: v for k, v in arguments.items() if k != "timeout_s"}
            if asked is not None and asked < limit:
                limit = float(asked)
        try:
            async with asyncio.timeout(limit):
                return await run(arguments)
        except TimeoutError:
            return ToolResult.fail(
                "timeout",
                f"tool {name!r} timed out after {limit:g} s (the body was cancelled)",
                where="wrapper",
                retryable=True,
                detail={"seconds": limit},
            )

    return Tool(wrapper_spec(inner, name, TIMEOUT_RESERVED), body)
