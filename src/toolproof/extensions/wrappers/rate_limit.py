"""``rate_limit``: a token bucket per variant; calls over the rate wait, none is dropped."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import Field

from toolproof.contract.bounds import MAX_COUNT, Rate
from toolproof.contract.tools import ToolResult
from toolproof.extensions.wrappers.common import StrictConfig, wrapper_spec
from toolproof.tools.tool import Tool

__all__ = ["RateLimitConfig", "TokenBucket", "rate_limit_factory"]


class RateLimitConfig(StrictConfig):
    """Config of ``rate_limit``.

    Attributes:
        rate: tokens added per second (calls per second sustained), > 0.
        burst: bucket capacity: calls that may start at once after a quiet period (>= 1).

    """

    rate: Rate
    burst: int = Field(1, ge=1, le=MAX_COUNT)


class TokenBucket:
    """A token bucket whose callers reserve a token and wait for it, first come first served.

    Args:
        rate: tokens per second.
        burst: capacity (the bucket starts full).
        clock: a monotonic clock in seconds.

    """

    def __init__(self, rate: float, burst: int, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take one token; return the seconds to wait before using it (0 if available)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= 1.0
        return -self._tokens / self.rate if self._tokens < 0 else 0.0

    def refund(self) -> None:
        """Give back a reserved token (its caller was cancelled while waiting)."""
        self._tokens = min(self.burst, self._tokens + 1.0)

    async def acquire(self) -> None:
        """Wait until a token is available; cancellation refunds the token and propagates."""
        wait = self.reserve()
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                self.refund()
                raise


def rate_limit_factory(inner: Tool, *, name: str, config: Any) -> Tool:
    """Build the ``rate_limit`` variant of ``inner``: every call first waits for a token."""
    cfg: RateLimitConfig = config
    bucket = TokenBucket(cfg.rate, cfg.burst)
    run = inner.run_validated

    async def body(arguments: dict[str, Any]) -> ToolResult:
        await bucket.acquire()
        return await run(arguments)

    return Tool(wrapper_spec(inner, name), body)
