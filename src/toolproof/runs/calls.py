"""How the executor reaches tools and time: live, or frozen from a recorded trace.

* :class:`LiveCalls` calls ``toolset[name].call(arguments)`` (extensions and backends
  apply there) and cancels a call that outlives the run's wall-clock budget.
* Both return each call as an :class:`~toolproof.tools.observe.Observed`: the result
  with what the call's layers reported (failures, approval events, relayed requests):
  live, collected by :func:`~toolproof.tools.observe.observe`; frozen, read back from
  the recorded ``failure_observed``, approval and ``request_relayed`` events (and who
  asked for the call: the ``model_call_id`` and ``model_turn`` of its ``tool_called``).
* :class:`FrozenCalls` serves recorded results by call id (the one replay matcher,
  :mod:`toolproof.runs.matcher`), with the recorded idempotency key, and never touches a tool:
  an unrecorded call (new arguments, another tool) refuses the replay, naming the
  step and what changed.
* Clocks decide where a wall-clock budget stops the run: :class:`LiveClock` by the
  monotonic clock, :class:`FrozenClock` at exactly the event index where the
  recorded run stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Protocol

from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    FailureObserved,
    PolicyDecided,
    RequestRelayed,
    RunFailed,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from toolproof.errors import ReplayRefused
from toolproof.runs.matcher import Matcher, changed_arguments
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
    """Serves recorded results by call id (the replay matcher); never calls a tool.

    Args:
        events: the recorded trace.
        lenient: instead of refusing an unrecorded call, answer it with an
            ``unrecorded`` failure and note the difference in :attr:`differences`.

    """

    mode = "frozen"
    live_calls = 0

    def __init__(self, events: Sequence[TraceEvent], *, lenient: bool = False) -> None:
        self.lenient = lenient
        self.differences: list[str] = []
        self.refused: ReplayRefused | None = None
        """The refusal raised, kept so a caller that swallowed it cannot hide it."""
        self._asked: dict[str, int] = {}
        self._observed: dict[str, list[tuple[ToolFailure, str]]] = {}
        self._approvals: dict[str, list[dict[str, Any]]] = {}
        self._policy: dict[str, dict[str, Any]] = {}
        self._relayed: dict[str, list[dict[str, Any]]] = {}
        self._keys: dict[str, str] = {}  # the recorded idempotency keys, by call id
        self._origins: dict[str, dict[str, str]] = {}  # the recorded model links, by call id
        results: list[tuple[str, int, ToolResult, str]] = []
        made: list[tuple[str, int, ToolCall, str]] = []
        for event in events:
            if isinstance(event, ApprovalRequested | ApprovalDecided | ApprovalSkipped):
                self._approvals.setdefault(event.call_id, []).append(approval_record(event))
            elif isinstance(event, PolicyDecided):
                plain = event.to_json()
                fields = {k: v for k, v in plain.items() if k not in _APPROVAL_EVENT_FIELDS}
                self._policy[event.call_id] = fields
            elif isinstance(event, ToolCalled):
                made.append((event.step, event.idx, event.call, ""))
                if event.idempotency_key is not None:
                    self._keys[event.call_id] = event.idempotency_key
                origin = {
                    name: value
                    for name in ("model_call_id", "model_turn")
                    if (value := getattr(event, name)) is not None
                }
                if origin:
                    self._origins[event.call_id] = origin
            elif isinstance(event, ToolReturned):
                results.append((event.call_id, event.idx, event.result, ""))
            elif isinstance(event, FailureObserved):
                entry = (event.failure, event.recovered_by)
                self._observed.setdefault(event.call_id, []).append(entry)
            elif isinstance(event, RequestRelayed):
                relayed = {
                    "method": event.method,
                    "request": event.request,
                    "answer": event.answer,
                    "error": event.error,
                }
                self._relayed.setdefault(event.call_id, []).append(relayed)
        # a call id answered twice (a reasoner's repeated provider call) serves its last result
        self._results: Matcher[str, ToolResult] = Matcher(reversed(results))
        self._made: Matcher[str, ToolCall] = Matcher(made)
        """The calls each step made, in order: what an unrecorded call is compared with."""

    async def call(self, call: ToolCall, timeout: float | None) -> Observed:
        """Return the recorded result of ``call`` with what its layers were recorded reporting.

        Raises:
            ReplayRefused: the call was not recorded (unless lenient); the message says
                whether the arguments or the tool changed.

        """
        step = call.step or ""
        occurrence = self._asked.get(step, 0)
        self._asked[step] = occurrence + 1
        recorded = self._results.get(call.id)
        if recorded is not None:
            return Observed(
                recorded,
                tuple(self._observed.get(call.id, ())),
                tuple(self._approvals.get(call.id, ())),
                tuple(self._relayed.get(call.id, ())),
                self._keys.get(call.id),
                self._origins.get(call.id),
                self._policy.get(call.id),
            )
        before = self._made.at(step, occurrence)
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

    def __init__(self, events: Sequence[TraceEvent]) -> None:
        self._stop = next(
            (
                event.idx
                for event in events
                if isinstance(event, RunFailed) and event.detail.get("budget") == "wall_seconds"
            ),
            None,
        )

    def remaining(self) -> float | None:
        """No wall-clock limit applies to recorded results."""
        return None

    def exceeded(self, next_idx: int) -> bool:
        """True exactly at the recorded stop."""
        return self._stop == next_idx
