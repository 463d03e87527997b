"""The ``failure-honesty`` check: no tool failure is turned into a plausible value.

The runtime records every failure a call's layers reported (``failure_observed``,
right after ``tool_returned``; see :mod:`toolproof.tools.observe`). This check
compares them with what was returned and how the step finished:

* a call that returned a value although a layer reported a failure that is **not**
  ``retryable`` and that no layer declared it recovered from (``recovered_by``, set
  by the ``retry`` wrapper when it runs the call again) means some layer caught the
  failure and answered with a value as if the call had succeeded;
* a step with a failed call must not finish ``ok``.
"""

from __future__ import annotations

from collections.abc import Callable

from toolproof.bundle.trace import TraceLine
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import (
    FailureObserved,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.verify.base import MAX_FINDINGS, Findings, TraceState, finding, stream_check
from toolproof.verify.view import RunView

__all__ = ["STREAMS", "check_failure_honesty"]


class _FailureHonesty:
    """``failure-honesty``: per call of the open step, its tool and last result's ``ok``.

    A call's ``failure_observed`` events come after its result, in its step: the calls
    are dropped when the next step starts. And per step with a failed call, that call.
    """

    def __init__(self, view: RunView) -> None:
        self.out = Findings()
        self.tools: dict[str, str] = {}
        self.returned_ok: dict[str, bool] = {}
        self.failed_steps: dict[str, str] = {}

    def feed(self, line: TraceLine) -> None:
        event = line.event
        if isinstance(event, StepStarted):
            self.tools.clear()
            self.returned_ok.clear()
        elif isinstance(event, ToolCalled):
            self.tools[event.call_id] = event.call.tool
        elif isinstance(event, ToolReturned):
            self.returned_ok[event.call_id] = event.result.ok
            if event.result.failure is not None:
                self.failed_steps.setdefault(event.step, event.call_id)
        elif isinstance(event, FailureObserved):
            honest = event.failure.retryable or event.recovered_by
            if self.returned_ok.get(event.call_id) and not honest:
                tool = self.tools.get(event.call_id, "?")
                self.out.add(
                    finding(
                        Severity.ERROR,
                        TRACE_FILE,
                        f"event {event.idx}: call {event.call_id} to {tool!r} (step "
                        f"{event.step!r}) returned a value although a layer reported "
                        f"{event.failure.kind}: {event.failure.message}; a layer turned a "
                        "failure into a value: let the failure through (or mark it retryable "
                        "and retry)",
                        event=event.idx,
                        call=event.call_id,
                    )
                )
        elif isinstance(event, StepFinished) and event.status == "ok":
            call_id = self.failed_steps.get(event.step)
            if call_id is not None:
                self.out.add(
                    finding(
                        Severity.ERROR,
                        TRACE_FILE,
                        f"event {event.idx}: step {event.step!r} finished ok although its call "
                        f"{call_id} failed; a failed call fails its step",
                        event=event.idx,
                        call=call_id,
                    )
                )

    def finish(self) -> list[Finding]:
        return self.out[:MAX_FINDINGS]


def check_failure_honesty(view: RunView) -> list[Finding] | None:
    """Compare the failures the runtime observed with the results and step statuses."""
    return stream_check(view, _FailureHonesty)


STREAMS: dict[str, Callable[[RunView], TraceState | None]] = {"failure-honesty": _FailureHonesty}
"""The trace state of this module's check, by check id."""
