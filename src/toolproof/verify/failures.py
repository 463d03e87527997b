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

from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import FailureObserved, StepFinished, ToolCalled, ToolReturned
from toolproof.verify.base import MAX_FINDINGS, finding
from toolproof.verify.view import RunView

__all__ = ["check_failure_honesty"]


def check_failure_honesty(view: RunView) -> list[Finding] | None:
    """Compare the failures the runtime observed with the results and step statuses."""
    if view.events is None:
        return None
    out: list[Finding] = []
    tools: dict[str, str] = {}
    returned: dict[str, ToolReturned] = {}
    failed_steps: dict[str, str] = {}
    for event in view.events:
        if isinstance(event, ToolCalled):
            tools[event.call_id] = event.call.tool
        elif isinstance(event, ToolReturned):
            returned[event.call_id] = event
            if event.result.failure is not None:
                failed_steps.setdefault(event.step, event.call_id)
        elif isinstance(event, FailureObserved):
            result = returned.get(event.call_id)
            honest = event.failure.retryable or event.recovered_by
            if result is not None and result.result.ok and not honest:
                tool = tools.get(event.call_id, "?")
                out.append(
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
            call_id = failed_steps.get(event.step)
            if call_id is not None:
                out.append(
                    finding(
                        Severity.ERROR,
                        TRACE_FILE,
                        f"event {event.idx}: step {event.step!r} finished ok although its call "
                        f"{call_id} failed; a failed call fails its step",
                        event=event.idx,
                        call=call_id,
                    )
                )
    return out[:MAX_FINDINGS]
