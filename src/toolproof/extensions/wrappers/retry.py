"""``retry``: run the call again on listed failure kinds, with exponential backoff and jitter."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import Field

from toolproof.contract.bounds import Delay
from toolproof.contract.tools import ToolResult
from toolproof.extensions.wrappers.common import StrictConfig, require_repeatable, wrapper_spec
from toolproof.failures import retried_kinds
from toolproof.tools.observe import note_recovery
from toolproof.tools.tool import Tool

__all__ = ["DEFAULT_RETRY_ON", "RetryConfig", "retry_factory"]

DEFAULT_RETRY_ON = retried_kinds()
"""Failure kinds retried by default: those :data:`toolproof.failures.FAILURE_TABLE` marks
``retried`` (``tool_error``, ``timeout``, ``worker``, ``transport``, ``backend``,
``unavailable``); ``invalid_arguments`` and ``invalid_result`` are not."""


class RetryConfig(StrictConfig):
    """Config of ``retry``.

    Attributes:
        attempts: total attempts, the first included (1..100).
        backoff: seconds to wait before the second attempt.
        multiplier: each later wait is the previous one times this.
        max_backoff: cap of one wait, in seconds (before jitter).
        jitter: each wait is scaled by a uniform factor in ``[1 - jitter, 1 + jitter]``.
        seed: seed of the jitter's random generator (deterministic waits); ``None``: random.
        retry_on: failure kinds that are retried.
        force: allow the wrapper on a tool marked neither read-only nor idempotent and
            not honouring the idempotency key.

    """

    attempts: int = Field(3, ge=1, le=100)
    backoff: Delay = 0.1
    multiplier: float = Field(2.0, ge=1, le=100)
    max_backoff: Delay = 10.0
    jitter: float = Field(0.1, ge=0, le=1)
    seed: int | None = None
    retry_on: tuple[str, ...] = DEFAULT_RETRY_ON
    force: bool = False


def _exhausted(result: ToolResult, attempts: int) -> ToolResult:
    failure = result.failure
    if failure is None:
        return result
    detail = {**failure.detail, "attempts": attempts}
    return ToolResult.fail(
        failure.kind,
        failure.message,
        where=failure.where,
        retryable=failure.retryable,
        detail=detail,
    )


def retry_factory(inner: Tool, *, name: str, config: Any) -> Tool:
    """Build the ``retry`` variant of ``inner``; see :class:`RetryConfig`.

    A failure of a listed kind is retried until ``attempts`` are spent; the last
    failure is returned with ``detail.attempts``. Cancellation is never retried. Every
    attempt runs inside the same call, so it reads the same idempotency key.

    Raises:
        ExtensionError: the tool is neither read-only nor idempotent nor honours the
            idempotency key (``idempotency="key"``), and ``force`` is off.

    """
    cfg: RetryConfig = config
    require_repeatable(inner, "retry", cfg.force, keyed=True)
    run = inner.run_validated
    rng = random.Random(cfg.seed)
    retry_on = frozenset(cfg.retry_on)

    async def body(arguments: dict[str, Any]) -> ToolResult:
        delay = cfg.backoff
        attempt = 1
        while True:
            result = await run(arguments)
            failure = result.failure
            if failure is None or failure.kind not in retry_on:
                return result
            if attempt >= cfg.attempts:
                return _exhausted(result, attempt)
            note_recovery(failure, "retry")  # handled by running the call again
            wait = min(delay, cfg.max_backoff)
            if cfg.jitter:
                wait *= 1 + rng.uniform(-cfg.jitter, cfg.jitter)
            await asyncio.sleep(wait)
            delay *= cfg.multiplier
            attempt += 1

    return Tool(wrapper_spec(inner, name), body)
