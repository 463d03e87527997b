"""Sync bodies run on a bounded pool of their own; timed-out bodies cannot starve it.

Issue 12 item 5: eight timed-out sync calls made an unrelated sync tool wait 59 s.
Now a call that would queue behind abandoned bodies is refused at once.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolproof.contract.tools import ToolResult
from toolproof.extensions.wrappers.timeout import TimeoutConfig, timeout_factory
from toolproof.tools import sync_bodies as module
from toolproof.tools.sync_bodies import SyncBodies
from toolproof.tools.tool import Tool

RELEASE = threading.Event()


def block() -> str:
    """Block until the test releases the body."""
    RELEASE.wait(10)
    return "released"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> SyncBodies:
    pool = SyncBodies(threads=2)
    monkeypatch.setattr(module, "_DEFAULT", pool)
    RELEASE.clear()
    return pool


def test_timed_out_sync_bodies_make_new_calls_fail_fast(small_pool: SyncBodies) -> None:
    blocking = timeout_factory(
        Tool.from_function(block), name="block_timeout", config=TimeoutConfig(seconds=0.2)
    )
    adder = Tool.from_function(add)

    async def go() -> tuple[list[ToolResult], ToolResult, int, ToolResult, ToolResult]:
        timed_out = await asyncio.gather(blocking.call({}), blocking.call({}))
        refused = await adder.call({"a": 1, "b": 2})
        stuck = small_pool.abandoned  # the blocked bodies end only when released (or at 10 s)
        async_ok = await Tool.from_function(_async_add).call({"a": 1, "b": 2})
        RELEASE.set()
        for _ in range(200):
            if small_pool.abandoned == 0:
                break
            await asyncio.sleep(0.01)
        again = await adder.call({"a": 2, "b": 2})
        return timed_out, refused, stuck, async_ok, again

    timed_out, refused, stuck, async_ok, again = asyncio.run(go())
    assert [r.failure.kind if r.failure else None for r in timed_out] == ["timeout", "timeout"]
    assert refused.failure is not None
    assert (refused.failure.kind, refused.failure.where) == ("unavailable", "body")
    assert refused.failure.retryable is True
    assert refused.failure.message == (
        "tool 'add' was refused: all 2 threads for sync tool bodies are busy and 2 of them "
        "still run bodies whose callers stopped waiting (a timeout cannot stop a sync body); "
        "retry later, or run a body that must stop on time in the process backend "
        '(extensions = [["process"]])'
    )
    assert refused.failure.detail == {"threads": 2, "abandoned": 2}
    assert stuck == 2  # refused at once, while both bodies still block: not queued behind them
    assert async_ok.value == 3  # async bodies do not use the pool
    assert again.value == 4  # once the bodies ended, the pool serves again


async def _async_add(a: int, b: int) -> int:
    """Add two integers, asynchronously."""
    return a + b


def test_busy_threads_without_abandoned_bodies_queue(small_pool: SyncBodies) -> None:
    blocking = Tool.from_function(block)
    adder = Tool.from_function(add)

    async def go() -> list[ToolResult]:
        held = [asyncio.ensure_future(blocking.call({})) for _ in range(2)]
        await asyncio.sleep(0.1)
        queued = asyncio.ensure_future(adder.call({"a": 1, "b": 1}))
        await asyncio.sleep(0.1)
        assert not queued.done()  # waiting for a thread, not refused
        RELEASE.set()
        return [*(await asyncio.gather(*held)), await queued]

    results = asyncio.run(go())
    assert [r.value for r in results] == ["released", "released", 2]


def test_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1, not 0"):
        SyncBodies(threads=0)
