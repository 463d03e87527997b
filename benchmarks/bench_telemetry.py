"""Telemetry cost per tool call (issue 20): off vs the pre-hook path, on, and pydantic-ai's.

One command: ``python benchmarks/bench_telemetry.py [--calls N] [--repeat R]``.

Measured in the same run on ``async def add(a: int, b: int) -> int`` bound with
``Tool.from_function``:

* **before**: a ``Tool`` whose validated run does not go through the telemetry layer
  (the same validation, body and result steps) — the anchor;
* **off**: ``Tool.call`` with no telemetry installed (through the no-op layer
  :data:`toolproof.tools.hooks.OFF`);
* **on**: ``Tool.call`` after ``toolproof.instrument`` with an SDK ``TracerProvider``
  whose span processor drops finished spans (span creation, attributes, digests and
  the two metric instruments are all paid; no exporter I/O);
* **pydantic-ai on / off**: what one more tool call costs in a pydantic-ai agent run
  whose model (a ``FunctionModel``) asks for the same ``add`` K times in one turn,
  instrumented with ``InstrumentationSettings(tracer_provider=<the same provider>,
  include_content=False)`` (content off, as toolproof's default) or not: the marginal
  cost ``(T(K=33) - T(K=1)) / 32`` of a whole run, so the fixed cost of the run, its
  two model requests and their spans cancels out. Its ``execute_tool add`` span per
  call is the span toolproof's "on" pays for.

Each figure is the median over ``repeat`` interleaved rounds of the mean CPU time
(``time.process_time``) of one call in a round of ``calls`` calls. Target: off costs
at most 5 % more than before. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof import Tool, ToolResult
from toolproof.adapters.telemetry.instrument import uninstrument

ARGS = {"a": 1, "b": 2}


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class _Before(Tool):
    """A ``Tool`` whose validated run skips the telemetry layer (runs ``_run`` itself)."""

    __slots__ = ()

    def run_validated(self, arguments: dict[str, Any]) -> Awaitable[ToolResult]:
        return self._run(arguments)


class _Drop(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        """Drop the span."""


async def _round(call: Callable[[dict[str, Any]], Awaitable[Any]], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        await call(ARGS)
    return (time.process_time() - started) / calls


FEW, MANY = 1, 33
"""Tool calls per turn of the two pydantic-ai runs whose difference is measured."""


def _pydantic_ai_agent(provider: TracerProvider | None) -> tuple[Agent[None, str], dict[str, int]]:
    """An agent whose model asks for ``add`` ``state["k"]`` times, then answers."""
    state = {"k": FEW}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("add", dict(ARGS), tool_call_id=f"call_{n}")
                    for n in range(state["k"])
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model))
    agent.tool_plain(add)
    if provider is not None:
        agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=False)
    return agent, state


async def _pydantic_ai_round(agent: Agent[None, str], state: dict[str, int], runs: int) -> float:
    """Seconds of CPU one more tool call adds to a pydantic-ai run (marginal, K=1 vs 33)."""
    spent = {}
    for k in (FEW, MANY):
        state["k"] = k
        started = time.process_time()
        for _ in range(runs):
            assert (await agent.run("go")).output == "done"
        spent[k] = (time.process_time() - started) / runs
    return (spent[MANY] - spent[FEW]) / (MANY - FEW)


async def main(calls: int, repeat: int) -> int:
    tool = Tool.from_function(add)
    before = _Before.from_function(add)
    assert (await before.call(ARGS)).value == (await tool.call(ARGS)).value == 3
    provider = TracerProvider()
    provider.add_span_processor(_Drop())
    meters = MeterProvider()
    plain_agent, plain_state = _pydantic_ai_agent(None)
    traced_agent, traced_state = _pydantic_ai_agent(provider)
    runs = max(calls // (10 * MANY), 3)
    rows: dict[str, list[float]] = {
        "before": [],
        "off": [],
        "on": [],
        "pydantic-ai off": [],
        "pydantic-ai on": [],
    }
    for _ in range(repeat):
        rows["before"].append(await _round(before.call, calls))
        rows["off"].append(await _round(tool.call, calls))
        toolproof.instrument(tracer_provider=provider, meter_provider=meters)
        rows["on"].append(await _round(tool.call, calls))
        uninstrument()
        rows["pydantic-ai off"].append(await _pydantic_ai_round(plain_agent, plain_state, runs))
        rows["pydantic-ai on"].append(await _pydantic_ai_round(traced_agent, traced_state, runs))
    median = {name: statistics.median(values) * 1e6 for name, values in rows.items()}
    ratio = statistics.median(o / b for o, b in zip(rows["off"], rows["before"], strict=True))
    print(f"before (anchor): {median['before']:.2f} us/call")
    print(f"off:             {median['off']:.2f} us/call  ({ratio:.3f}x before)")
    print(f"on:              {median['on']:.2f} us/call  (+{median['on'] - median['off']:.2f} us)")
    pai_off, pai_on = median["pydantic-ai off"], median["pydantic-ai on"]
    print(f"pydantic-ai off: {pai_off:.2f} us/call  (marginal tool call in an agent run)")
    print(f"pydantic-ai on:  {pai_on:.2f} us/call  (+{pai_on - pai_off:.2f} us, same provider)")
    return 0 if ratio <= 1.05 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.calls, options.repeat)))
