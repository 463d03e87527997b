"""``timeout``: cancel the body after a time limit; a caller may lower it with ``timeout_s``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from time import monotonic
from typing import Any

from toolproof.contract.bounds import Seconds
from toolproof.contract.tools import ToolResult
from toolproof.extensions.schema import is_flat_object_schema
from toolproof.extensions.wrappers.common import StrictConfig, wrapper_spec
from toolproof.extensions.wrappers.deadlines import deadlines, into, resume
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

    The inner call is cancelled when the limit passes and the call fails with kind
    ``timeout`` (retryable, ``where="wrapper"``), with the semantics of
    ``asyncio.timeout`` (the task is cancelled, then uncancelled; a body that swallows
    the cancellation and returns keeps its result). The limit counts from the call's
    start (its first step included). ``timeout_s`` lowers the limit for one call,
    never raises it. An outer cancellation propagates. The deadline is kept in the
    event loop's table of :mod:`~toolproof.extensions.wrappers.deadlines` (one loop
    timer for every pending call), not in a timer per call, and only once the inner
    call suspends: a call that ends in its first step (the loop never ran meanwhile,
    so no timer could have fired) costs no deadline, and no coroutine of the layer's
    own (its body returns the inner :class:`ToolResult` itself, see
    :data:`~toolproof.tools.tool.Body`).
    """
    cfg: TimeoutConfig = config
    seconds = float(cfg.seconds)

    def validating(arguments: dict[str, Any], box: list[ToolResult]) -> Generator[Any, Any, None]:
        return into(inner.call(arguments), box)  # the inner schema validates again

    # flat: the inner call's own frame is the generator the body steps
    steps: Callable[[dict[str, Any], list[ToolResult]], Generator[Any, Any, None]] = (
        inner.run_validated_into if is_flat_object_schema(inner.spec.input_schema) else validating
    )

    def body(arguments: dict[str, Any]) -> ToolResult | Awaitable[ToolResult]:
        limit = seconds
        if "timeout_s" in arguments:
            asked = arguments["timeout_s"]
            if asked is not None:
                arguments = {k: v for k, v in arguments.items() if k != "timeout_s"}
                if asked < limit:
                    limit = float(asked)
        started = monotonic()
        box: list[ToolResult] = []
        step = steps(arguments, box)
        for yielded in step:
            return suspended(step, yielded, box, started, limit)  # it suspended
        # it ended without suspending: the loop never ran, no deadline could pass
        return box[0]

    async def suspended(
        step: Generator[Any, Any, None],
        yielded: Any,
        box: list[ToolResult],
        started: float,
        limit: float,
    ) -> ToolResult:
        # the deadline counts from the call's start (the loop clock runs at monotonic's rate)
        loop = asyncio.get_running_loop()
        when = loop.time() + limit - (monotonic() - started)
        task = asyncio.current_task(loop)
        if task is None:
            step.close()
            raise RuntimeError("the timeout wrapper runs inside an asyncio task")
        cancelling = task.cancelling()
        table = deadlines(loop)
        entry = table.add(loop, task, when)
        try:
            await resume(step, yielded)
        except asyncio.CancelledError:
            expired = entry.expired
            table.finish(entry)
            if expired and task.uncancel() <= cancelling:
                return ToolResult.fail(
                    "timeout",
                    f"tool {name!r} timed out after {limit:g} s (the body was cancelled)",
                    where="wrapper",
                    retryable=True,
                    detail={"seconds": limit},
                )
            raise
        except BaseException:
            if entry.expired:
                task.uncancel()
            table.finish(entry)
            raise
        if entry.expired:
            task.uncancel()  # the body swallowed the cancellation and returned
        table.finish(entry)
        return box[0]

    return Tool(wrapper_spec(inner, name, TIMEOUT_RESERVED), body)
