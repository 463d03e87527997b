"""What a call's layers observed travels with its result: ``observe`` returns one ``Observed``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.errors import ToolCallError
from toolproof.runs.calls import LiveCalls
from toolproof.tools.context import Context
from toolproof.tools.observe import (
    CallScope,
    Observed,
    current_call,
    note_approval,
    note_failure,
    note_recovery,
    observe,
)
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

FIRST = ToolFailure(kind="tool_error", message="first", retryable=True)
SECOND = ToolFailure(kind="timeout", message="second", retryable=True)


def test_observed_holds_the_other_failures_once_with_who_recovered_approvals_and_relayed() -> None:
    relayed: list[dict[str, Any]] = []

    async def call() -> ToolResult:
        note_failure(FIRST)
        note_recovery(FIRST, "retry")
        note_failure(FIRST)  # the same failure again: one entry
        note_approval({"type": "approval_skipped", "reason": "no rule matched"})
        relayed.append({"method": "sampling/createMessage", "request": {}, "answer": None})
        note_failure(SECOND)  # the one returned: not an "other" failure
        return ToolResult(ok=False, failure=SECOND)

    observed = asyncio.run(observe(call(), relayed))
    assert observed == Observed(
        ToolResult(ok=False, failure=SECOND),
        ((FIRST, "retry"),),
        ({"type": "approval_skipped", "reason": "no rule matched"},),
        ({"method": "sampling/createMessage", "request": {}, "answer": None},),
    )


def test_notes_outside_observe_go_nowhere() -> None:
    note_failure(FIRST)
    note_approval({"type": "approval_skipped"})

    async def call() -> ToolResult:
        return ToolResult.success(1)

    assert asyncio.run(observe(call())) == Observed(ToolResult.success(1))


def test_observe_passes_on_what_the_call_raises() -> None:
    async def call() -> ToolResult:
        note_failure(FIRST)
        raise ToolCallError(FIRST)

    with pytest.raises(ToolCallError):
        asyncio.run(observe(call()))


def test_the_live_port_returns_a_failure_a_layer_hid_with_the_result() -> None:
    toolset = Toolset()

    async def inner(n: int) -> int:
        raise ValueError("no stock")

    inner_tool = Tool.from_function(inner, description="Fails.")
    toolset.add(inner_tool)

    async def outer(n: int) -> str:
        await inner_tool.call({"n": n})  # its failure is dropped: plausible text instead
        return "all fine"

    toolset.add(Tool.from_function(outer, description="Hides a failure."))
    calls = LiveCalls(toolset.seal())
    observed = asyncio.run(calls.call(ToolCall(tool="outer", arguments={"n": 1}, step="s"), None))
    assert observed.result == ToolResult.success("all fine")
    assert [(failure.kind, failure.message, by) for failure, by in observed.failures] == [
        ("tool_error", "tool 'inner' raised ValueError: no stock", "")
    ]
    assert not hasattr(calls, "observed")  # no side-channel getter keyed by call id


def test_the_call_s_layers_read_who_is_calling_from_the_one_call_scope() -> None:
    async def approver(request: Any) -> bool:
        return True

    seen: list[CallScope | None] = []

    async def inner() -> ToolResult:
        seen.append(current_call())
        return ToolResult.success(2)

    async def outer() -> ToolResult:
        seen.append(current_call())
        await observe(inner())  # a call made inside the call keeps who is calling
        return ToolResult.success(1)

    asyncio.run(observe(outer(), call_id="call_1", approver=approver))
    assert seen == [CallScope("call_1", approver), CallScope("call_1", approver)]
    assert current_call() is None  # outside an observed call


class _Channel:
    def __init__(self) -> None:
        self.progress_seen: list[tuple[float, float | None, str | None]] = []

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        raise AssertionError("not used")

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress_seen.append((progress, total, message))

    async def sample(self, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not used")

    async def elicit(self, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not used")


def test_a_body_s_context_reaches_the_channel_the_call_was_made_with() -> None:
    channel = _Channel()

    async def report(n: int, ctx: Context) -> int:
        await ctx.report_progress(n, 2, "half")
        return n

    tool = Tool.from_function(report, description="Reports progress.")

    async def served() -> Observed:
        return await observe(tool.call({"n": 1}), channel=channel)

    assert asyncio.run(served()).result == ToolResult.success(1)
    assert channel.progress_seen == [(1, 2, "half")]
    assert asyncio.run(tool.call({"n": 1})) == ToolResult.success(1)  # no channel: dropped
    assert channel.progress_seen == [(1, 2, "half")]
