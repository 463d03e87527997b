"""The ``policy`` check: every ``[policy]`` decision re-evaluated offline (docs/policy.md).

It runs for a run whose ``runtime.json`` records a policy set (the Toolset
descriptor's ``policy``), streamed in verify's one pass over the trace, and proves
from the run directory alone:

* the recorded policy set digests to its recorded ``digest``, and every
  ``policy_decided`` names that digest;
* each ``policy_decided`` sits right before its call's ``tool_called`` (an approval
  event may come between), and its request is that call's: the same tool, with the
  attributes the recorded set binds to it (``tools``, when recorded), the same
  arguments, the call counts the trace gives for its principal (``calls``: the
  principal's earlier decided calls of the tool; ``total_calls``: all its earlier
  decided calls; a served run has a principal per named client);
* Cedar, given the stored policies and the recorded request, gives the recorded
  decision, determining ids and errors;
* a denied call failed ``denied_by_policy`` (its body never ran), an allowed one did
  not; a call with no decision failed ``invalid_arguments`` (validation comes first).

In segment 2 or later of a sealed session (``segment.json``) the counts continue the
earlier segments': each principal's first count of each tool and first ``total_calls``
are taken as recorded, and must increase by one from there. ``elapsed_seconds`` and the
principal are the request's word (a wall clock cannot be re-read; a served client's
name is its token's, which the run does not hold). Its
findings are verification failures named ``policy`` outside ``report.json``'s check
sequence (like ``manifest``), so runs without a policy keep their report and id.
"""

from __future__ import annotations

from typing import Any

from toolproof.bundle.trace import TraceLine
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import ApprovalDecided, PolicyDecided, ToolCalled, ToolReturned
from toolproof.tools.policy import PolicyError, PolicySet
from toolproof.verify.base import Check, Findings, finding, stream_check
from toolproof.verify.keys import later_segment
from toolproof.verify.view import RunView

__all__ = ["POLICY_CHECK", "PolicyState", "policy_state"]

_C = Severity.CRITICAL
_UNRUN = frozenset({"denied_by_policy", "approval_denied", "approval_pending"})
"""The failures of a call whose body never ran for want of an approval."""


class PolicyState:
    """The ``policy`` check's state over one pass (per call: its pending decision).

    Args:
        view: the run; ``policy`` is its recorded policy set.
        policy: the set ``runtime.json`` records, as its JSON.

    """

    def __init__(self, view: RunView, policy: dict[str, Any]) -> None:
        self.out = Findings()
        self.digest = str(policy.get("digest"))
        self.pending: dict[str, PolicyDecided] = {}
        self.approved: set[str] = set()  # pending calls with an approving decision
        self.unapproved: set[str] = set()  # approval required, none given: must not run
        self.decided: dict[str, PolicyDecided] = {}
        self.calls: dict[tuple[str, str], int] = {}  # (principal, tool): decided calls
        self.total: dict[str, int] = {}  # principal: decided calls
        self.later = later_segment(view.directory)  # its counts continue its predecessor's
        self.policy: PolicySet | None = None
        try:
            self.policy = PolicySet.from_json(policy)
        except PolicyError as exc:
            self._add(f"runtime.json's policy set does not load: {exc.message}")
            return
        if self.policy.digest != self.digest:
            self._add(
                f"runtime.json's policy set digests to {self.policy.digest}, but records "
                f"{self.digest}"
            )

    def _add(self, message: str, **detail: Any) -> None:
        self.out.add(finding(_C, TRACE_FILE, message, **detail))

    def feed(self, line: TraceLine) -> None:
        """Take the next event (see the module docstring)."""
        if self.policy is None:
            return
        event = line.event
        if isinstance(event, PolicyDecided):
            if event.call_id in self.pending or event.call_id in self.decided:
                self._add(f"event {event.idx}: a second policy_decided for call {event.call_id}")
                return
            self.pending[event.call_id] = event
        elif isinstance(event, ApprovalDecided) and event.call_id in self.pending:
            if event.decision in ("approve", "approve_with_edits"):
                self.approved.add(event.call_id)
        elif isinstance(event, ToolCalled):
            decided = self.pending.pop(event.call_id, None)
            if decided is not None:
                self._judge(decided, event)
                self._approval(decided, event.call_id in self.approved)
                self.approved.discard(event.call_id)
                self.decided[event.call_id] = decided
        elif isinstance(event, ToolReturned):
            self._returned(event)

    def _start(self, given: object) -> int:
        """Where a count starts: 0, or in a later segment the recorded count."""
        return given if self.later and type(given) is int and given >= 0 else 0

    def _judge(self, decided: PolicyDecided, called: ToolCalled) -> None:
        """Compare a decision with its call and with Cedar's answer now."""
        assert self.policy is not None
        where = f"policy_decided at event {decided.idx} for call {called.call_id}"
        request: dict[str, Any] = dict(decided.request)
        context = request.get("context")
        context = context if isinstance(context, dict) else {}
        tool = called.call.tool
        who = str(request.get("principal"))  # the counts are the principal's own
        seen = self.calls.get((who, tool))
        # a later segment's first call of a tool continues its predecessor's count
        calls = seen if seen is not None else self._start(context.get("calls"))
        total = self.total.get(who)
        total = total if total is not None else self._start(context.get("total_calls"))
        expected: dict[str, Any] = {
            "tool": tool,
            "arguments": dict(called.call.arguments),
            "calls": calls,
            "total_calls": total,
        }
        self.calls[who, tool] = calls + 1
        self.total[who] = total + 1
        given: dict[str, Any] = {
            "tool": request.get("tool"),
            "arguments": context.get("arguments"),
            "calls": context.get("calls"),
            "total_calls": context.get("total_calls"),
        }
        bound = self.policy.tools.get(tool)
        if bound is not None:  # the set records each tool's attributes as loaded
            expected["attributes"] = dict(bound)
            given["attributes"] = request.get("attributes")
        for name, value in expected.items():
            if given[name] != value:
                self._add(
                    f"{where}: its request's {name} is {given[name]!r}, but the call's is "
                    f"{value!r}",
                    event=decided.idx,
                    call=called.call_id,
                )
                return
        if decided.digest != self.digest:
            self._add(
                f"{where}: names policy set {decided.digest}, but runtime.json records "
                f"{self.digest}",
                event=decided.idx,
                call=called.call_id,
            )
            return
        try:
            now = self.policy.decide(request)
        except (PolicyError, KeyError, TypeError) as exc:
            self._add(f"{where}: its request cannot be evaluated: {exc}", event=decided.idx)
            return
        recorded = (
            decided.decision,
            list(decided.determining),
            sorted(decided.errors),  # in Cedar's order before they were sorted
            decided.approval_required,
        )
        given_now = (now.decision, list(now.determining), list(now.errors), now.approval)
        if recorded != given_now:
            self._add(
                f"{where}: recorded {recorded[0]} (determining {recorded[1]}, approval "
                f"required: {recorded[3]}), but the stored policies give {given_now[0]} "
                f"(determining {given_now[1]}, approval required: {given_now[3]})",
                event=decided.idx,
                call=called.call_id,
            )

    def _approval(self, decided: PolicyDecided, approved: bool) -> None:
        """An allow that requires approval and has no approving decision must not run."""
        if decided.decision == "allow" and decided.approval_required and not approved:
            self.unapproved.add(decided.call_id)

    def _returned(self, event: ToolReturned) -> None:
        """A denied call failed ``denied_by_policy``; an undecided one, validation."""
        decided = self.decided.pop(event.call_id, None)
        failure = event.result.failure
        kind = None if failure is None else str(failure.kind)
        if event.call_id in self.unapproved:
            self.unapproved.discard(event.call_id)
            if kind not in _UNRUN:
                self._add(
                    f"event {event.idx}: call {event.call_id} needed a person's approval by "
                    f"policy and has no approving decision, but its result is "
                    f"{kind or 'a value'}: the body ran",
                    event=event.idx,
                    call=event.call_id,
                )
            return
        if decided is None:
            if kind != "invalid_arguments":
                self._add(
                    f"event {event.idx}: call {event.call_id} ran without a policy decision "
                    f"(result: {kind or 'a value'})",
                    event=event.idx,
                    call=event.call_id,
                )
        elif decided.decision == "deny" and kind != "denied_by_policy":
            self._add(
                f"event {event.idx}: call {event.call_id} was denied by policy, but its "
                f"result is {kind or 'a value'}: the body ran",
                event=event.idx,
                call=event.call_id,
            )
        elif decided.decision == "allow" and kind == "denied_by_policy":
            self._add(
                f"event {event.idx}: call {event.call_id} was allowed by policy, but fails "
                "denied_by_policy",
                event=event.idx,
                call=event.call_id,
            )

    def finish(self) -> list[Finding]:
        """The findings, with every decision no call followed."""
        for call_id, decided in self.pending.items():
            self._add(
                f"policy_decided at event {decided.idx} names call {call_id}, which no "
                "tool_called follows",
                event=decided.idx,
                call=call_id,
            )
        return list(self.out)


def policy_state(view: RunView) -> PolicyState | None:
    """The check's state for ``view``, or ``None`` when its runtime records no policy set."""
    runtime = view.runtime
    if runtime is None or runtime.toolset.policy is None:
        return None
    return PolicyState(view, dict(runtime.toolset.policy))


POLICY_CHECK = Check(
    "policy",
    "INV-POLICY-DECIDED",
    _C,
    "every [policy] decision is the one the stored Cedar policies give for its call's "
    "recorded request; a denied call never ran",
    lambda view: stream_check(view, policy_state),
    stream=policy_state,
)
"""The ``policy`` check, run by ``verify_run`` for runs that record a policy set."""
