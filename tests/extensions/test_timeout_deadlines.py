"""The ``timeout`` wrapper's deadline table: one loop timer, asyncio.timeout's semantics."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from typing import Any

import pytest

from toolproof import Tool
from toolproof.extensions import ComboElement, build_combo
from toolproof.extensions.wrappers.deadlines import deadlines


async def _sleep_for(a: float) -> float:
    """Sleep ``a`` seconds, return ``a``."""
    await asyncio.sleep(a)
    return a


def timed(seconds: float) -> Tool:
    base = Tool.from_function(_sleep_for)
    [(_, variant)] = build_combo(base, [ComboElement("timeout", {"seconds": seconds})])
    return variant


def test_concurrent_calls_with_different_limits_each_time_out_at_their_own() -> None:
    tool = timed(30)

    async def main() -> list[Any]:
        calls = [
            tool.call({"a": 60, "timeout_s": 0.2}),
            tool.call({"a": 0.01}),
            tool.call({"a": 60, "timeout_s": 0.05}),
            tool.call({"a": 0.02, "timeout_s": 10}),
        ]
        return list(await asyncio.gather(*calls))

    first, second, third, fourth = asyncio.run(main())
    assert (first.failure.kind, first.failure.detail) == ("timeout", {"seconds": 0.2})
    assert second.value == 0.01
    assert (third.failure.kind, third.failure.detail) == ("timeout", {"seconds": 0.05})
    assert fourth.value == 0.02


def test_fast_calls_keep_the_table_small_and_leave_the_task_uncancelled() -> None:
    tool = timed(60)

    async def main() -> tuple[int, int, int]:
        for _ in range(5000):
            assert (await tool.call({"a": 0})).value == 0
        task = asyncio.current_task()
        assert task is not None
        return len(deadlines(asyncio.get_running_loop())), task.cancelling(), 0

    size, cancelling, _ = asyncio.run(main())
    assert size <= 2 * 64 + 2  # finished entries are compacted away
    assert cancelling == 0


def test_a_body_that_swallows_the_cancellation_keeps_its_result() -> None:
    async def stubborn(a: int) -> str:
        """Ignore one cancellation."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "kept"
        return "slept"

    [(_, tool)] = build_combo(
        Tool.from_function(stubborn), [ComboElement("timeout", {"seconds": 0.05})]
    )

    async def main() -> tuple[Any, int]:
        result = await tool.call({"a": 1})
        task = asyncio.current_task()
        assert task is not None
        return result.value, task.cancelling()

    assert asyncio.run(main()) == ("kept", 0)


def test_an_outer_cancel_during_an_expired_call_still_propagates() -> None:
    tool = timed(0.05)
    started = asyncio.Event()

    async def stubborn(a: int) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.2)  # cleanup outlives the deadline: the outer cancel lands
        return "x"

    [(_, tool)] = build_combo(
        Tool.from_function(stubborn), [ComboElement("timeout", {"seconds": 0.05})]
    )

    async def main() -> None:
        task = asyncio.create_task(tool.call({"a": 1}))
        await started.wait()
        await asyncio.sleep(0.1)  # the deadline passed; the body is in its cleanup
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_the_table_does_not_keep_a_finished_loop_alive() -> None:
    tool = timed(60)
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(tool.call({"a": 0})).value == 0
    loop.close()
    ref = weakref.ref(loop)
    del loop
    gc.collect()
    assert ref() is None


def test_the_limit_counts_from_the_calls_start_its_first_step_included() -> None:
    async def block_then_sleep(a: float) -> str:
        """Block ``a`` seconds before the first await, then sleep ``a`` seconds."""
        time.sleep(a)
        await asyncio.sleep(a)
        return "done"

    base = Tool.from_function(block_then_sleep)
    [(_, tight)] = build_combo(base, [ComboElement("timeout", {"seconds": 0.15})])
    [(_, loose)] = build_combo(base, [ComboElement("timeout", {"seconds": 30})])
    # 0.1 s of the limit went in the first step: the deadline falls inside the sleep
    result = asyncio.run(tight.call({"a": 0.1}))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.detail) == ("timeout", {"seconds": 0.15})
    assert asyncio.run(loose.call({"a": 0.1})).value == "done"
