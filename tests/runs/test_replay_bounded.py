"""Replay and finalize read a recording once and hold no event: 8 bytes an indexed event.

A recorded session of 32 calls, each returning 256 KiB (an 8 MiB trace): serving every
call frozen from the committed run's trace, and summing up the live session's trace for
its run, each peak well under what the parsed events would take (the values alone are
8 MiB), bounded by a read block and a few lines instead.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolproof import Tool, Toolset
from toolproof.contract.tools import ToolCall
from toolproof.runs.calls import FrozenCalls, FrozenClock
from toolproof.runs.finalize import finalize_session
from toolproof.runs.live import open_recording
from toolproof.runs.livetrace import live_evidence, scan_live
from toolproof.runs.replay import replay_run
from toolproof.runs.traceindex import TraceIndex
from toolproof.tools.observe import Observed
from toolproof.verify.view import RunView

CALLS = 32
SIZE = 256 * 1024
BOUND = 4 << 20
"""The peak allowed: a 1 MiB read block and a few 256 KiB lines (the values are 8 MiB)."""


def _value(n: int) -> str:
    return f"{n:04d}" + "x" * (SIZE - 4)


def _toolset() -> Toolset:
    async def big(n: int) -> str:
        return _value(n)

    tools = Toolset()
    tools.add(Tool.from_function(big, name="big", description="A big document."))
    return tools.seal()


async def _live(root: Path) -> Path:
    tools = _toolset()
    session = open_recording(root, tools, task="bounded", session_id="bounded")
    for n in range(CALLS):
        admission = session.admit("big", {"n": n})
        session.record(admission, Observed(await tools["big"].call({"n": n})))
    session.close()
    return session.directory


@pytest.fixture
def live(tmp_path: Path) -> Path:
    return asyncio.run(_live(tmp_path))


def _peak(work: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        done = work()
        return done, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_summing_up_a_live_trace_holds_no_event(live: Path) -> None:
    evidence = live_evidence(live)  # the live pack is read whole, outside the bound
    trace, peak = _peak(lambda: scan_live(live, evidence))
    assert (live / "trace.jsonl").stat().st_size > CALLS * SIZE
    assert peak < BOUND, peak
    assert trace.dropped == [] and trace.problem is None
    assert (len(trace.tools), len(trace.steps), len(trace.recording)) == (CALLS, CALLS, 2 * CALLS)
    assert [step.arguments for step in trace.steps] == [{"n": n} for n in range(CALLS)]


def test_serving_every_call_of_a_run_holds_no_event(live: Path) -> None:
    outcome = asyncio.run(finalize_session(live, live.parent.parent))
    run = outcome.path
    calls = [
        ToolCall(tool="big", arguments={"n": n}, step=json.loads(line)["step"])
        for n, line in enumerate(
            line
            for line in (run / "trace.jsonl").read_bytes().splitlines()
            if b'"type":"tool_called"' in line
        )
    ]
    view = RunView(run)

    def serve() -> list[str]:
        with TraceIndex(run / "trace.jsonl") as recording:
            view.scan([recording.add])
            frozen = FrozenCalls(recording)
            values = []
            for call in calls:  # each result dropped once looked at
                value = asyncio.run(frozen.call(call, None)).result.value
                values.append(value[:4] if isinstance(value, str) else "")
            assert FrozenClock(recording).remaining() is None and recording.stop is None
            return values

    values, peak = _peak(serve)
    assert values == [f"{n:04d}" for n in range(CALLS)]
    assert peak < BOUND, peak


def test_a_replay_of_a_big_run_stays_identical(live: Path) -> None:
    outcome = asyncio.run(finalize_session(live, live.parent.parent))
    result = asyncio.run(replay_run(outcome.path))
    assert (result.identical, result.report_matches, result.live_calls) == (True, True, 0)
    assert result.events == len((outcome.path / "trace.jsonl").read_bytes().splitlines())
