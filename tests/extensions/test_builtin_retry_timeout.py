"""The ``retry`` and ``timeout`` wrappers: counts, backoff, annotations, cancellation."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from ext_support import Recorder, elements, make_tool, refusal, run

from toolproof import Tool, ToolResult
from toolproof.extensions import build_combo


def variant(base: Tool, *items: Any) -> Tool:
    return build_combo(base, elements(*items))[-1][1]


def test_retry_retries_until_success() -> None:
    body = Recorder(RuntimeError("flaky"), RuntimeError("flaky"), 7)
    result = run(variant(make_tool(body=body), ("retry", {"backoff": 0})).call({"a": 1}))
    assert (result.ok, result.value, len(body.calls)) == (True, 7, 3)


def test_retry_gives_up_after_attempts_with_the_last_failure() -> None:
    body = Recorder(*[RuntimeError(f"try {n}") for n in range(1, 6)])
    result = run(
        variant(make_tool(body=body), ("retry", {"attempts": 4, "backoff": 0})).call({"a": 1})
    )
    assert len(body.calls) == 4
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message, result.failure.detail) == (
        "tool_error",
        "tool 'add' raised RuntimeError: try 4",
        {"exception": "builtins.RuntimeError", "attempts": 4},
    )


def test_retry_only_retries_listed_kinds() -> None:
    body = Recorder(RuntimeError("no"), 1)
    tool = variant(make_tool(body=body), ("retry", {"backoff": 0, "retry_on": ["timeout"]}))
    result = run(tool.call({"a": 1}))
    assert (result.ok, len(body.calls)) == (False, 1)


def test_invalid_result_is_not_retried_by_default() -> None:
    body = Recorder(ToolResult.fail("invalid_result", "bad"), 1)
    result = run(variant(make_tool(body=body), ("retry", {"backoff": 0})).call({"a": 1}))
    assert (result.ok, len(body.calls)) == (False, 1)


def test_backoff_with_seeded_jitter_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("toolproof.extensions.wrappers.retry.asyncio.sleep", fake_sleep)
    config = {"attempts": 4, "backoff": 0.1, "multiplier": 3, "max_backoff": 0.5, "jitter": 0.5}
    body = Recorder(*[RuntimeError("x")] * 4)
    run(variant(make_tool(body=body), ("retry", {**config, "seed": 7})).call({"a": 1}))
    rng = random.Random(7)
    expected = [base * (1 + rng.uniform(-0.5, 0.5)) for base in (0.1, 0.3, 0.5)]
    assert waits == pytest.approx(expected)


REFUSED = (
    "it is marked neither read-only nor idempotent, nor does it honour the idempotency key "
    '(rule: mark the tool read_only, idempotent or idempotency = "key": '
    "@toolproof.tool(read_only=True), @toolproof.tool(idempotent=True) or "
    '@toolproof.tool(idempotency="key") on a Python function; readOnlyHint or idempotentHint '
    'on a declared or MCP tool, or idempotency = "key" in its [tools.NAME] table; or set '
    "config force = true)"
)
"""The rule of a ``retry`` refused on a tool with none of the three options (issue 34)."""


def test_retry_refused_on_a_tool_neither_read_only_nor_idempotent() -> None:
    base = make_tool("put", read_only=None)
    assert refusal(base, "retry") == (
        "cannot apply combo [retry] to tool 'put': 'retry' refused on tool 'put': " + REFUSED
    )
    assert variant(base, ("retry", {"force": True})).name == "put_retry"
    assert variant(make_tool("set", read_only=None, idempotent=True), "retry").name == "set_retry"


def test_retry_never_swallows_cancellation() -> None:
    started = asyncio.Event()
    calls: list[int] = []

    async def hang(arguments: dict[str, Any]) -> Any:
        calls.append(1)
        started.set()
        await asyncio.sleep(60)

    tool = variant(make_tool(body=hang), ("retry", {"backoff": 0}))

    async def go() -> None:
        task = asyncio.create_task(tool.call({"a": 1}))
        await started.wait()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    assert calls == [1]


def test_timeout_cancels_the_body() -> None:
    seen: list[str] = []

    async def slow(arguments: dict[str, Any]) -> Any:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    tool = variant(make_tool(body=slow), ("timeout", {"seconds": 0.05}))
    result = run(tool.call({"a": 1}))
    assert seen == ["cancelled"]
    assert result.failure is not None
    assert result.failure.to_json() == {
        "schema_version": 1,
        "kind": "timeout",
        "message": "tool 'add_timeout' timed out after 0.05 s (the body was cancelled)",
        "retryable": True,
        "where": "wrapper",
        "detail": {"seconds": 0.05},
    }


def test_timeout_s_lowers_the_limit_and_is_stripped() -> None:
    async def slow(arguments: dict[str, Any]) -> Any:
        await asyncio.sleep(float(arguments.get("b", 0)))
        return sorted(arguments)

    tool = variant(make_tool(body=slow), ("timeout", {"seconds": 30}))
    started = time.monotonic()
    lowered = run(tool.call({"a": 1, "b": 10, "timeout_s": 0.05}))
    assert time.monotonic() - started < 10  # the body (10 s) was not waited for
    assert lowered.failure is not None and lowered.failure.detail == {"seconds": 0.05}
    assert run(tool.call({"a": 1, "timeout_s": 100})).value == ["a"]
    refused = run(tool.call({"a": 1, "timeout_s": 0}))
    assert refused.failure is not None and refused.failure.kind == "invalid_arguments"


async def _sleep_for(a: float) -> float:
    """Sleep ``a`` seconds, return ``a``."""
    await asyncio.sleep(a)
    return a


def timed(base: Tool, seconds: float) -> Tool:
    return variant(base, ("timeout", {"seconds": seconds}))


def test_concurrent_calls_with_different_limits_each_time_out_at_their_own() -> None:
    tool = timed(Tool.from_function(_sleep_for), 30)

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


def test_calls_that_end_in_time_leave_the_task_uncancelled() -> None:
    tool = timed(Tool.from_function(_sleep_for), 60)

    async def main() -> int:
        for a in (0, 0.001, 0):
            assert (await tool.call({"a": a})).value == a
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    assert asyncio.run(main()) == 0


def test_a_body_that_swallows_the_cancellation_keeps_its_result() -> None:
    async def stubborn(a: int) -> str:
        """Ignore one cancellation."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "kept"
        return "slept"

    tool = timed(Tool.from_function(stubborn), 0.05)

    async def main() -> tuple[Any, int]:
        result = await tool.call({"a": 1})
        task = asyncio.current_task()
        assert task is not None
        return result.value, task.cancelling()

    assert asyncio.run(main()) == ("kept", 0)


def test_an_outer_cancel_during_an_expired_call_still_propagates() -> None:
    started = asyncio.Event()

    async def stubborn(a: int) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.2)  # cleanup outlives the deadline: the outer cancel lands
        return "x"

    tool = timed(Tool.from_function(stubborn), 0.05)

    async def main() -> None:
        task = asyncio.create_task(tool.call({"a": 1}))
        await started.wait()
        await asyncio.sleep(0.1)  # the deadline passed; the body is in its cleanup
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_the_limit_counts_from_the_calls_start_its_first_step_included() -> None:
    async def block_then_sleep(a: float) -> str:
        """Block ``a`` seconds before the first await, then sleep ``a`` seconds."""
        time.sleep(a)
        await asyncio.sleep(a)
        return "done"

    base = Tool.from_function(block_then_sleep)
    # 0.1 s of the limit went in the first step: the deadline falls inside the sleep
    result = asyncio.run(timed(base, 0.15).call({"a": 0.1}))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.detail) == ("timeout", {"seconds": 0.15})
    assert asyncio.run(timed(base, 30).call({"a": 0.1})).value == "done"


def test_timeout_inside_retry_retries_timeouts() -> None:
    body = Recorder()
    outcomes = [60, 0]

    async def sometimes_slow(arguments: dict[str, Any]) -> Any:
        await body(arguments)
        await asyncio.sleep(outcomes.pop(0))
        return "done"

    tool = variant(
        make_tool(body=sometimes_slow),
        ("timeout", {"seconds": 0.05}),
        ("retry", {"backoff": 0}),
    )
    result = run(tool.call({"a": 1}))
    assert (result.value, len(body.calls)) == ("done", 2)


@pytest.mark.parametrize(
    "items",
    [
        (("timeout", {"seconds": 30}),),
        ("cache",),
        (("rate_limit", {"rate": 100}),),
        (("args", {"rename": {"a": "a"}}),),
        (("project", {"expression": "@"}),),
    ],
    ids=["timeout", "cache", "rate_limit", "args", "project"],
)
def test_outer_cancellation_propagates_through_every_builtin(items: tuple[Any, ...]) -> None:
    started = asyncio.Event()

    async def hang(arguments: dict[str, Any]) -> Any:
        started.set()
        await asyncio.sleep(60)

    tool = variant(make_tool(body=hang), *items)

    async def go() -> None:
        task = asyncio.create_task(tool.call({"a": 1}))
        await started.wait()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
