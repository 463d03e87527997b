"""The ``approvals`` check (``INV-APPROVAL-BOUND``): every gated call that ran was approved.

From the run directory alone: each ``approval_requested`` / ``approval_decided`` sits
in the block of the call it names, before that call's ``tool_called``; the request
names the tool's recorded descriptor fingerprint and the digest of the call's own
arguments (RFC 8785, the reserved ``approval_handle`` left out); a call that ran (a
value, or a failure of the body) has an approving decision for that request whose
approved digest is the requested one (or, for ``approve_with_edits``, the digest of
the edited arguments it records); a denied request's call never ran.

Every call of an ``approve`` variant carries an approval record: a call no rule
gated records ``approval_skipped`` with the rules whose ``when`` held for the tool.
So a call that ran fails when its tool's runtime descriptor has an ``approve`` layer
with no layer outside it that may answer without calling inward (``cache``), as in
``t_approve`` and ``t_approve_timeout`` (or when other events name the variant), and its block
holds neither a request nor a skip (its events were removed); when a skip names a
rule whose ``arguments`` predicates hold for the call's recorded arguments (the rule
re-evaluated by the wrapper's own :class:`~toolproof.contract.approval_rules.CompiledRule`);
when a call with an ``approval_handle`` was skipped; and when a skip's rules differ
from another skip's or a request's of the same variant (see docs/approvals.md).

The rules are bound to the descriptor: each request and skip of a variant whose
runtime descriptor has ``approve`` as its outermost layer records the variant's
validated config (``policy``), whose RFC 8785 digest must be that layer's
``config_digest`` in runtime.json (which the variant's fingerprint covers). A skip is
then judged against the policy itself: under a policy without rules every call is
gated; a recorded rule must be the policy's rule of that index; and every policy rule
without ``when`` (it holds for every tool) is re-evaluated on the call's arguments,
whether the skip records it or not. A ``when`` naming MCP annotations cannot be
re-evaluated offline (runtime.json records no annotations), so which of those rules
held for the tool is the skip's word.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolproof.bundle.trace import TraceLine
from toolproof.contract.approval_rules import policy_rules, rule_from_record
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import (
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.identity import canonical_json, digest_json
from toolproof.verify.base import MAX_FINDINGS, Findings, TraceState, finding, stream_check
from toolproof.verify.view import RunView

__all__ = ["HANDLE_PARAM", "STREAMS", "check_approvals"]

HANDLE_PARAM = "approval_handle"
"""The reserved param of ``approve``, not part of the approved arguments."""

_NOT_RUN = frozenset({"approval_denied", "approval_pending"})
_CRIT = Severity.CRITICAL
_GATE_LAYER = "approve"
"""The stack layer name of the ``approve`` wrapper in a runtime descriptor."""

_ANSWERS_WITHOUT_INNER = frozenset({"cache"})
"""Layers that may answer a call without calling their inner tool (a cache hit)."""

_Approval = ApprovalRequested | ApprovalDecided | ApprovalSkipped

_NO_RECORD = (
    "it ran with no approval record (approval_requested or approval_skipped), "
    "although it is an approve variant: every call of one records one"
)


def _always_gated(stack: list[str]) -> bool:
    """Whether every call that ran of a variant with ``stack`` went through ``approve``.

    ``stack`` is its layer names, innermost first: it holds ``approve`` and no layer
    outside it (``cache``) may answer without calling inward. ``t_approve_timeout`` is;
    ``t_approve_cache`` is not (a cache hit runs no body and records no approval).
    """
    if _GATE_LAYER not in stack:
        return False
    outer = stack[len(stack) - 1 - stack[::-1].index(_GATE_LAYER) + 1 :]
    return not _ANSWERS_WITHOUT_INNER.intersection(outer)


def _ran(event: ToolReturned) -> bool:
    result = event.result
    if result.ok:
        return True
    failure = result.failure
    return failure is not None and failure.kind not in _NOT_RUN and failure.where == "body"


class _Block:
    """The approval events waiting for the next ``tool_called`` of a step."""

    def __init__(self) -> None:
        self.events: list[_Approval] = []


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


def _as_policy(record: Any) -> Any:
    """A recorded rule as its policy states it: without the schema ``defaults`` it records.

    The defaults come from the tool's input schema, which the run directory binds only
    through the variant's fingerprint; the recorded ones are used to evaluate the rule.
    """
    if isinstance(record, dict) and "defaults" in record:
        return {k: v for k, v in record.items() if k != "defaults"}
    return record


def _bound_rules(
    event: ApprovalSkipped | ApprovalRequested, layers: dict[str, str]
) -> list[dict[str, Any]] | None:
    """The rules of ``event``'s policy when it digests to its variant's layer config."""
    digest = layers.get(event.tool)
    if digest is None or event.policy is None or digest_json(event.policy) != digest:
        return None
    try:
        return policy_rules(event.policy)
    except ValueError:
        return None


def _check_skip(
    call: ToolCalled, skipped: ApprovalSkipped, layers: dict[str, str] | None = None
) -> list[str]:
    tool = call.call.tool
    if tool != skipped.tool and not tool.startswith(skipped.tool + "_"):
        return [f"approval_skipped names tool {skipped.tool!r}, not {tool!r}"]
    bound = _bound_rules(skipped, layers or {})
    if bound == []:
        return [
            f"it ran without an approval request, but the policy of {skipped.tool!r} that "
            "runtime.json binds has no rules: every call of it is gated"
        ]
    problems = []
    records = list(skipped.rules)
    if bound is not None:
        for record in skipped.rules:
            index = record.get("index")
            if (
                type(index) is not int
                or not 0 <= index < len(bound)
                or bound[index] != _as_policy(record)
            ):
                problems.append(
                    f"approval_skipped records rule {record!r}, which is not rule {index!r} of "
                    f"the policy runtime.json binds to {skipped.tool!r}"
                )
        recorded = {record.get("index") for record in skipped.rules}
        for entry in bound:
            if not entry["when"] and entry["index"] not in recorded:
                problems.append(
                    f"approval_skipped leaves out rule {entry['index']} of its policy, which has "
                    "no 'when' and so holds for every tool"
                )
                records.append(entry)
    if tool != skipped.tool:
        return problems  # an outer layer's arguments are not the gate's
    arguments = call.call.arguments
    if HANDLE_PARAM in arguments:
        return [
            *problems,
            f"it was retried with {HANDLE_PARAM} but records no approval request",
        ]
    for record in records:
        try:
            rule = rule_from_record(record)
        except ValueError as exc:
            problems.append(f"approval_skipped records a malformed rule: {exc}")
            continue
        if rule.matches(dict(arguments)):
            problems.append(
                f"rule {rule.index} matches its arguments, but it ran without an approval "
                "request (approval_skipped claims no rule matched)"
            )
    return problems


def _judge(
    call: ToolCalled,
    returned: ToolReturned,
    events: list[_Approval],
    fingerprints: dict[str, str] | None,
    gated: frozenset[str] = frozenset(),
    layers: dict[str, str] | None = None,
) -> list[str]:
    problems: list[str] = []
    requests = [e for e in events if isinstance(e, ApprovalRequested)]
    decisions = [e for e in events if isinstance(e, ApprovalDecided)]
    skips = [e for e in events if isinstance(e, ApprovalSkipped)]
    if not events and call.call.tool in gated and _ran(returned):
        return [_NO_RECORD]
    for event in events:
        if event.call_id != call.call_id:
            problems.append(
                f"{event.type} at event {event.idx} names call {event.call_id} but sits in the "
                "block of this call (a decision moved from another call)"
            )
    if skips:
        if requests or decisions or len(skips) > 1:
            problems.append("it has an approval_skipped and another approval record")
        problems.extend(_check_skip(call, skips[0], layers))
        return problems
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


class _Approvals:
    """``approvals`` over one pass of the trace.

    Keeps the approval events of open call blocks (until their call returns), the first
    skip's rules per variant, and, for what only a later event can decide, the first
    :data:`MAX_FINDINGS` candidates of each kind: a request whose variant has no skip
    yet (per variant and rule), and a call with no approval record whose tool no event
    has named yet (per tool). A candidate past the first :data:`MAX_FINDINGS` of its
    kind could never be among the findings kept, as all of its kind share one verdict.
    """

    def __init__(self, view: RunView) -> None:
        self.fingerprints: dict[str, str] | None = None
        self.layers: dict[str, str] = {}
        self.runtime_tools: frozenset[str] | None = None
        self.always: frozenset[str] = frozenset()
        if view.runtime is not None:
            tools = view.runtime.toolset.tools
            self.fingerprints = {tool.name: tool.fingerprint for tool in tools}
            self.runtime_tools = frozenset(tool.name for tool in tools)
            self.always = frozenset(
                tool.name for tool in tools if _always_gated([layer.name for layer in tool.stack])
            )
            self.layers = {
                tool.name: tool.stack[-1].config_digest
                for tool in tools
                if tool.stack and tool.stack[-1].name == _GATE_LAYER
            }
        self.named: set[str] = set()
        self.skip_rules = Findings()
        self.request_rules: list[tuple[int, Finding]] = []
        self.judged_now = 0
        self.policies = Findings()
        self.main: list[tuple[int, Finding]] = []
        self.order = 0
        self.rules: dict[str, tuple[int, list[Any]]] = {}
        self.requests: dict[tuple[str, str], list[tuple[int, ApprovalRequested]]] = {}
        self.unnamed: dict[str, list[tuple[int, int, str]]] = {}
        self.waiting: dict[str, list[_Approval]] = {}
        self.calls: dict[str, tuple[ToolCalled, list[_Approval]]] = {}

    def bad(self, idx: int, message: str) -> None:
        if len(self.main) < MAX_FINDINGS:
            self.main.append((self.order, finding(_CRIT, TRACE_FILE, message, event=idx)))
        self.order += 1

    def gated(self, tool: str) -> bool:
        if self.runtime_tools is None:
            return tool in self.named
        return tool in self.always or (tool in self.runtime_tools and tool in self.named)

    def feed(self, line: TraceLine) -> None:
        event = line.event
        if isinstance(event, _Approval):
            if isinstance(event, ApprovalRequested | ApprovalSkipped):
                self._named(event, line.position)
                _check_policies([event], self.layers, self._policy_bad)
            self.waiting.setdefault(event.step, []).append(event)
        elif isinstance(event, ToolCalled):
            self.calls[event.call_id] = (event, self.waiting.pop(event.step, []))
        elif isinstance(event, ToolReturned) and event.call_id in self.calls:
            call, events = self.calls.pop(event.call_id)
            tool = call.call.tool
            if not events and _ran(event) and not self.gated(tool):
                may_be = self.runtime_tools is None or tool in self.runtime_tools
                waiting = self.unnamed.setdefault(tool, []) if may_be else None
                if waiting is not None and len(waiting) < MAX_FINDINGS:
                    waiting.append((self.order, call.idx, call.call_id))
                self.order += 1
                return
            problems = _judge(
                call, event, events, self.fingerprints, frozenset({tool}), self.layers
            )
            for problem in problems:
                self.bad(call.idx, f"call {call.call_id} ({tool!r}): {problem}")
        elif isinstance(event, StepStarted):
            for stale in self.waiting.pop(event.step, []):
                self.bad(stale.idx, _orphan(stale))

    def _policy_bad(self, idx: int, message: str) -> None:
        self.policies.add(finding(_CRIT, TRACE_FILE, message, event=idx))

    def _named(self, event: ApprovalRequested | ApprovalSkipped, position: int) -> None:
        self.named.add(event.tool)
        if isinstance(event, ApprovalSkipped):
            first = self.rules.get(event.tool)
            if first is None:
                self.rules[event.tool] = (event.idx, event.rules)
            elif first[1] != event.rules:
                self.skip_rules.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"approval_skipped at event {event.idx} for call {event.call_id} "
                        f"records other rules for {event.tool!r} than approval_skipped at "
                        f"event {first[0]}",
                        event=event.idx,
                    )
                )
        elif event.tool in self.rules:
            self._judge_request(position, event)
        else:
            key = (event.tool, canonical_json(event.rule).decode())
            group = self.requests.setdefault(key, [])
            if len(group) < MAX_FINDINGS:
                group.append((position, event))

    def _judge_request(self, position: int, event: ApprovalRequested, now: bool = True) -> None:
        idx, recorded = self.rules[event.tool]
        if now and self.judged_now >= MAX_FINDINGS:
            return  # 50 earlier requests judged when they came are findings already
        if event.rule is None or event.rule not in recorded:
            self.judged_now += now
            message = (
                f"approval_requested at event {event.idx} for call {event.call_id} names "
                f"rule {event.rule!r}, which is not among the rules approval_skipped at "
                f"event {idx} records for {event.tool!r}"
            )
            self.request_rules.append(
                (position, finding(_CRIT, TRACE_FILE, message, event=event.idx))
            )

    def finish(self) -> list[Finding]:
        for events in self.waiting.values():
            for stale in events:
                self.bad(stale.idx, _orphan(stale))
        for (tool, _), group in self.requests.items():
            if tool in self.rules:
                for position, event in group:
                    self._judge_request(position, event, now=False)
        main = list(self.main)
        for tool, candidates in self.unnamed.items():
            if self.gated(tool):
                main += [
                    (
                        order,
                        finding(
                            _CRIT, TRACE_FILE, f"call {call_id} ({tool!r}): {_NO_RECORD}", event=idx
                        ),
                    )
                    for order, idx, call_id in candidates
                ]
        requests = [item for _, item in sorted(self.request_rules, key=lambda pair: pair[0])]
        out = [*self.skip_rules, *requests, *self.policies]
        out += [item for _, item in sorted(main, key=lambda pair: pair[0])]
        return out[:MAX_FINDINGS]


def check_approvals(view: RunView) -> list[Finding] | None:
    """Every executed gated call has an approving decision bound to it; denied calls never ran."""
    return stream_check(view, _Approvals)


def _check_policies(events: Any, layers: dict[str, str], bad: Any) -> None:
    """Every request and skip of a gated variant records the policy runtime.json binds.

    The policy's digest must be the ``config_digest`` of the variant's outermost
    ``approve`` layer; a request's rule must be one of its rules (``None`` only when it
    has none).
    """
    for event in events:
        if not isinstance(event, ApprovalRequested | ApprovalSkipped) or event.tool not in layers:
            continue
        where = f"{event.type} at event {event.idx} for call {event.call_id}"
        expected = layers[event.tool]
        if event.policy is None:
            bad(
                event.idx,
                f"{where} records no policy, but runtime.json records {event.tool!r} with an "
                f"approve layer whose config digest is {expected}",
            )
            continue
        actual = digest_json(event.policy)
        if actual != expected:
            bad(
                event.idx,
                f"{where} records a policy for {event.tool!r} that digests to {actual}, but "
                f"runtime.json records its approve layer's config digest as {expected} (the "
                "recorded policy is not the variant's)",
            )
            continue
        bound = _bound_rules(event, layers)
        if bound is None:
            bad(event.idx, f"{where} records a policy whose 'rules' is not a list of objects")
        elif isinstance(event, ApprovalRequested) and (
            (event.rule is None) != (not bound)
            or (event.rule is not None and _as_policy(event.rule) not in bound)
        ):
            bad(
                event.idx,
                f"{where} names rule {event.rule!r}, which is not a rule of the policy "
                f"runtime.json binds to {event.tool!r}",
            )


def _orphan(event: Any) -> str:
    return (
        f"{event.type} at event {event.idx} for call {event.call_id} is followed by no "
        "tool_called in its step (it must come before the call it approves)"
    )


STREAMS: dict[str, Callable[[RunView], TraceState | None]] = {"approvals": _Approvals}
"""The trace state of this module's check, by check id."""
