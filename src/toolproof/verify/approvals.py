"""The ``approvals`` check (``INV-APPROVAL-BOUND``): every gated call that ran was approved.

From the run directory alone: each ``approval_requested`` / ``approval_decided`` sits
in the block of the call it names, before that call's ``tool_called``; the request
names the tool's recorded descriptor fingerprint and the digest of the call's own
arguments (RFC 8785, the reserved ``approval_handle`` left out); a call that ran (a
value, or a failure of the body) has an approving decision for that request whose
approved digest is the requested one (or, for ``approve_with_edits``, the digest of
the edited arguments it records); a denied request's call never ran.

A call whose policy rules did not match carries no approval events. When another call
of the same variant records ``rule: null`` (no rules: every call is gated), a call of
that variant that ran without any approval event fails too; otherwise the check
cannot tell a non-matching call from one whose events were all removed (see
docs/approvals.md).
"""

from __future__ import annotations

from typing import Any

from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import (
    ApprovalDecided,
    ApprovalRequested,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.identity import digest_json
from toolproof.verify.base import MAX_FINDINGS, finding
from toolproof.verify.view import RunView

__all__ = ["HANDLE_PARAM", "check_approvals"]

HANDLE_PARAM = "approval_handle"
"""The reserved param of ``approve``, not part of the approved arguments."""

_NOT_RUN = frozenset({"approval_denied", "approval_pending"})
_CRIT = Severity.CRITICAL


def _ran(event: ToolReturned) -> bool:
    result = event.result
    if result.ok:
        return True
    failure = result.failure
    return failure is not None and failure.kind not in _NOT_RUN and failure.where == "body"


class _Block:
    """The approval events waiting for the next ``tool_called`` of a step."""

    def __init__(self) -> None:
        self.events: list[ApprovalRequested | ApprovalDecided] = []


def _check_request(
    call: ToolCalled, request: ApprovalRequested, fingerprints: dict[str, str] | None
) -> str | None:
    tool = call.call.tool
    if tool != request.tool and not tool.startswith(request.tool + "_"):
        return f"approval was requested for tool {request.tool!r}, not {tool!r}"
    if fingerprints is not None and fingerprints.get(request.tool) != request.fingerprint:
        recorded = fingerprints.get(request.tool)
        return (
            f"approval was requested for descriptor {request.fingerprint}, but the runtime "
            f"records {request.tool!r} as {recorded}"
        )
    if tool == request.tool:
        arguments = {k: v for k, v in call.call.arguments.items() if k != HANDLE_PARAM}
        actual = digest_json(arguments)
        if actual != request.arguments_digest:
            return (
                f"approval was requested for arguments {request.arguments_digest}, but the "
                f"call's arguments digest to {actual}"
            )
    return None


def _check_decision(request: ApprovalRequested, decided: ApprovalDecided) -> str | None:
    if decided.request != request.request:
        return f"the decision is for request {decided.request}, not {request.request}"
    if decided.decision == "approve" and decided.approved_digest != request.arguments_digest:
        return (
            f"the decision approves {decided.approved_digest}, not the requested arguments "
            f"{request.arguments_digest}"
        )
    if decided.decision == "approve_with_edits":
        if decided.edited_arguments is None:
            return "an approve_with_edits decision records no edited arguments"
        edited = digest_json(dict(decided.edited_arguments))
        if decided.approved_digest != edited:
            return (
                f"the decision approves {decided.approved_digest}, but its edited arguments "
                f"digest to {edited}"
            )
    return None


def _judge(
    call: ToolCalled,
    returned: ToolReturned,
    events: list[ApprovalRequested | ApprovalDecided],
    fingerprints: dict[str, str] | None,
    every_call: frozenset[str] = frozenset(),
) -> list[str]:
    problems: list[str] = []
    requests = [e for e in events if isinstance(e, ApprovalRequested)]
    decisions = [e for e in events if isinstance(e, ApprovalDecided)]
    if not events and call.call.tool in every_call and _ran(returned):
        return [
            "it ran without an approval request, although every call of this variant is "
            "gated (its other requests record no rules)"
        ]
    for event in events:
        if event.call_id != call.call_id:
            problems.append(
                f"{event.type} at event {event.idx} names call {event.call_id} but sits in the "
                "block of this call (a decision moved from another call)"
            )
    if not requests:
        if decisions:
            problems.append("it has a decision but no approval request")
        return problems
    if len(requests) > 1 or len(decisions) > 1:
        problems.append("it has more than one approval request or decision")
    request = requests[0]
    why = _check_request(call, request, fingerprints)
    if why is not None:
        problems.append(why)
    decided = decisions[0] if decisions else None
    if decided is not None:
        why = _check_decision(request, decided)
        if why is not None:
            problems.append(why)
    if _ran(returned):
        if decided is None:
            problems.append(f"it ran without a decision on request {request.request}")
        elif decided.decision == "deny":
            problems.append(f"it ran although request {request.request} was denied")
    return problems


def check_approvals(view: RunView) -> list[Finding] | None:
    """Every executed gated call has an approving decision bound to it; denied calls never ran."""
    if view.events is None:
        return None
    fingerprints = None
    if view.runtime is not None:
        fingerprints = {tool.name: tool.fingerprint for tool in view.runtime.toolset.tools}
    out: list[Finding] = []
    every_call = frozenset(
        event.tool
        for event in view.events
        if isinstance(event, ApprovalRequested) and event.rule is None
    )
    waiting: dict[str, list[ApprovalRequested | ApprovalDecided]] = {}
    calls: dict[str, tuple[ToolCalled, list[ApprovalRequested | ApprovalDecided]]] = {}

    def bad(idx: int, message: str) -> None:
        out.append(finding(_CRIT, TRACE_FILE, message, event=idx))

    for event in view.events:
        if isinstance(event, ApprovalRequested | ApprovalDecided):
            waiting.setdefault(event.step, []).append(event)
        elif isinstance(event, ToolCalled):
            calls[event.call_id] = (event, waiting.pop(event.step, []))
        elif isinstance(event, ToolReturned) and event.call_id in calls:
            call, events = calls.pop(event.call_id)
            for problem in _judge(call, event, events, fingerprints, every_call):
                bad(call.idx, f"call {call.call_id} ({call.call.tool!r}): {problem}")
        elif isinstance(event, StepStarted):
            for stale in waiting.pop(event.step, []):
                bad(stale.idx, _orphan(stale))
    for events in waiting.values():
        for stale in events:
            bad(stale.idx, _orphan(stale))
    return out[:MAX_FINDINGS]


def _orphan(event: Any) -> str:
    return (
        f"{event.type} at event {event.idx} for call {event.call_id} is followed by no "
        "tool_called in its step (it must come before the call it approves)"
    )
