"""How the executor reaches tools and time: live, or frozen from a recorded trace.

* :class:`LiveCalls` calls ``toolset[name].call(arguments)`` (extensions and backends
  apply there) and cancels a call that outlives the run's wall-clock budget.
* Both return each call as an :class:`~toolproof.tools.observe.Observed`: the result
  with what the call's layers reported (failures, approval events, relayed requests):
  live, collected by :func:`~toolproof.tools.observe.observe`; frozen, read back from
  the recorded ``failure_observed``, approval and ``request_relayed`` events (and who
  asked for the call: the ``model_call_id`` and ``model_turn`` of its ``tool_called``).
* :class:`FrozenCalls` serves recorded results by call id, read back from the recorded
  trace through its index (:mod:`toolproof.runs.traceindex`), with the recorded
  idempotency key, and never touches a tool: an unrecorded call (new arguments,
  another tool) refuses the replay, naming the step and what changed.
* Clocks decide where a wall-clock budget stops the run: :class:`LiveClock` by the
  monotonic clock, :class:`FrozenClock` at exactly the event index where the
  recorded run stopped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    FailureObserved,
    PolicyDecided,
    RequestRelayed,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import ReplayRefused
from toolproof.runs.matcher import changed_arguments
from toolproof.runs.traceindex import TraceIndex
from toolproof.tools.observe import Observed, observe
from toolproof.tools.policy import DEFAULT_PRINCIPAL, PolicyGate, gated_call
from toolproof.tools.toolset import Toolset

__all__ = [
    "CallPort",
    "Clock",
    "FrozenCalls",
    "FrozenClock",
    "LiveCalls",
    "LiveClock",
]


class CallPort(Protocol):
    """Makes one tool call for the executor."""

    mode: str

    async def call(self, call: ToolCall, timeout: float | None) -> Observed:
        """Make ``call``; ``timeout`` is seconds left in the budget.

        Returns:
            The result with what the call's layers reported (failures besides the
            returned one, approval events, relayed requests): live, as the layers
            reported them; frozen, as recorded (a replay never asks for a decision again).

        """
        ...


_APPROVAL_EVENT_FIELDS = frozenset({"idx", "prev", "step", "call_id", "schema_version"})


def approval_record(
    event: ApprovalRequested | ApprovalDecided | ApprovalSkipped,
) -> dict[str, Any]:
    """The ``{"type": ..., fields}`` record of a recorded approval event (as the gate notes it)."""
    plain = event.to_json()
    return {k: v for k, v in plain.items() if k not in _APPROVAL_EVENT_FIELDS}


class Clock(Protocol):
    """Where the wall-clock budget runs out."""

    def remaining(self) -> float | None:
        """Seconds left (``None``: no wall-clock budget)."""
        ...

    def exceeded(self, next_idx: int) -> bool:
        """Whether the budget is spent, checked before the event at ``next_idx``."""
        ...


class LiveClock:
    """The monotonic clock against ``wall_seconds`` (``None``: unlimited)."""

    def __init__(self, wall_seconds: float | None) -> None:
        self.wall_seconds = wall_seconds
        self._deadline = None if wall_seconds is None else time.monotonic() + wall_seconds

    def remaining(self) -> float | None:
        """Seconds left, never below 0; ``None`` without a budget."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def exceeded(self, next_idx: int) -> bool:
        """Whether the deadline has passed."""
        return self._deadline is not None and time.monotonic() >= self._deadline


class LiveCalls:
    """Calls tools of a Toolset; counts the calls it makes in :attr:`live_calls`."""

    mode = "live"

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset
        self.live_calls = 0
        policy = toolset.policy  # [policy]: each call decided first, as Agent::default
        self._gate = None if policy is None else PolicyGate(policy, DEFAULT_PRINCIPAL)

    async def call(self, call: ToolCall, timeout: float | None) -> Observed:
        """Call the tool; a call still running when ``timeout`` runs out is cancelled.

        Returns:
            The tool's result, or a ``timeout`` failure (``where="runtime"``) naming the
            wall-clock budget, with what the call's layers reported.

        """
        tool = self.toolset[call.tool]
        self.live_calls += 1

        async def bounded() -> ToolResult:
            try:
                called = gated_call(self._gate, tool, dict(call.arguments))
                return await asyncio.wait_for(called, timeout)
            except TimeoutError:
                return ToolResult.fail(
                    "timeout",
                    f"call to {call.tool!r} cancelled: the run's wall-clock budget ran out",
                    where="runtime",
                    detail={"budget": "wall_seconds"},
                )

        return await observe(bounded(), call_id=call.id)


class FrozenCalls:
    """Serves recorded results by call id; never calls a tool.

    Each call's recorded events (``tool_called``, ``tool_returned``, what its layers
    reported) are read back from the trace by its id when it is asked
    (:class:`~toolproof.runs.traceindex.TraceIndex`): nothing is held per call.

    Args:
        recording: the recorded trace's index.
        lenient: instead of refusing an unrecorded call, answer it with an
            ``unrecorded`` failure and note the difference in :attr:`differences`.

    """

    mode = "frozen"
    live_calls = 0

    def __init__(self, recording: TraceIndex, *, lenient: bool = False) -> None:
        self.recording = recording
        self.lenient = lenient
        self.differences: list[str] = []
        self.refused: ReplayRefused | None = None
        """The refusal raised, kept so a caller that swallowed it cannot hide it."""
        self._asked = ("", 0)  # the step asking and how many calls it asked before

    def _served(self, call_id: str) -> Observed | None:
        """The recorded result of ``call_id`` with what its layers reported, or ``None``.

        A call id answered twice (a reasoner's repeated provider call) serves its last
        result.
        """
        result: ToolResult | None = None
        observed: list[tuple[ToolFailure, str]] = []
        approvals: list[dict[str, Any]] = []
        relayed: list[dict[str, Any]] = []
        policy: dict[str, Any] | None = None
        key: str | None = None
        origin: dict[str, str] | None = None
        for event in self.recording.find("call", call_id):
            if isinstance(event, ApprovalRequested | ApprovalDecided | ApprovalSkipped):
                approvals.append(approval_record(event))
            elif isinstance(event, PolicyDecided):
                plain = event.to_json()
                policy = {k: v for k, v in plain.items() if k not in _APPROVAL_EVENT_FIELDS}
            elif isinstance(event, ToolCalled):
                key = event.idempotency_key if event.idempotency_key is not None else key
                made = {
                    name: value
                    for name in ("model_call_id", "model_turn")
                    if (value := getattr(event, name)) is not None
                }
                origin = made or origin
            elif isinstance(event, ToolReturned):
                result = event.result
            elif isinstance(event, FailureObserved):
                observed.append((event.failure, event.recovered_by))
            elif isinstance(event, RequestRelayed):
                relayed.append(
                    {
                        "method": event.method,
                        "request": event.request,
                        "answer": event.answer,
                        "error": event.error,
                    }
                )
        if result is None:
            return None
        return Observed(
            result, tuple(observed), tuple(approvals), tuple(relayed), key, origin, policy
        )

    def _made(self, step: str, occurrence: int) -> ToolCall | None:
        """The call ``step`` made at ``occurrence`` (from 0; past the last: the last).

        Read in a pass over the recorded trace (only to explain an unrecorded call).
        """
        made: ToolCall | None = None
        seen = 0
        for event in self.recording.events():
            if isinstance(event, ToolCalled) and event.step == step:
                made, seen = event.call, seen + 1
                if seen > occurrence:
                    break
        return made

    async def call(self, call: ToolCall, timeout: float | None) -> Observed:
        """Return the recorded result of ``call`` with what its layers were recorded reporting.

        Raises:
            ReplayRefused: the call was not recorded (unless lenient); the message says
                whether the arguments or the tool changed.

        """
        step = call.step or ""
        asking, before_count = self._asked
        occurrence = before_count if asking == step else 0
        self._asked = (step, occurrence + 1)  # a step's calls are made while it runs
        recorded = self._served(call.id)
        if recorded is not None:
            return recorded
        before = self._made(step, occurrence)
        if before is None:
            why = f"step {call.step!r} made no tool call in the recorded run"
        elif before.tool != call.tool:
            why = f"step {call.step!r} now calls {call.tool!r}, recorded {before.tool!r}"
        else:
            why = f"step {call.step!r} calls {call.tool!r} with changed arguments " + (
                changed_arguments(dict(before.arguments), dict(call.arguments))
            )
        message = f"unrecorded call {call.id}: {why}; a live call would be a new run"
        if not self.lenient:
            self.refused = ReplayRefused(
                f"frozen replay refused: {message}", call=call.id, step=call.step, rule=why
            )
            raise self.refused
        self.differences.append(message)
        return Observed(ToolResult.fail("unrecorded", message, where="runtime"))


class FrozenClock:
    """Stops the run where the recorded run stopped for its wall-clock budget, if it did."""

    def __init__(self, recording: TraceIndex) -> None:
        self._stop = recording.stop

    def remaining(self) -> float | None:
        """No wall-clock limit applies to recorded results."""
        return None

    def exceeded(self, next_idx: int) -> bool:
        """True exactly at the recorded stop."""
        return self._stop == next_idx
