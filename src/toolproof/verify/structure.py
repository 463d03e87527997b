"""Structural checks: schema, plan, trace order and chain, call/result linkage, links."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from toolproof.bundle.trace import TraceLine
from toolproof.contract.layout import CLAIMS_FILE, PLAN_FILE, RUN_FILES, RUNTIME_FILE, TRACE_FILE
from toolproof.contract.runs import MODEL_PROVIDER_KIND, Finding, PlanNode, Severity, StepKind
from toolproof.contract.trace import (
    ClaimEmitted,
    EvidenceRegistered,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from toolproof.identity import canonical_json
from toolproof.verify.base import (
    MAX_FINDINGS,
    Findings,
    KeySet,
    TraceState,
    finding,
    stream_check,
)
from toolproof.verify.compact import Multiset, compact_key
from toolproof.verify.keys import KeyLedger
from toolproof.verify.model_calls import ModelLinks
from toolproof.verify.view import RunView

__all__ = [
    "STREAMS",
    "check_call_linkage",
    "check_links",
    "check_plan",
    "check_schema",
    "check_trace_chain",
]

_CRIT = Severity.CRITICAL


def check_schema(view: RunView) -> list[Finding]:
    """Every run file parses as its model, at a supported schema version, in canonical form."""
    return [
        finding(_CRIT, rel, view.problems[rel] + "; the file is damaged or not a toolproof run")
        for rel in RUN_FILES
        if rel in view.problems
    ]


_STEP_KINDS = (StepKind.CALL, StepKind.RETRIEVE, StepKind.MODEL, StepKind.READ, StepKind.PROMPT)


def _text(value: Any) -> str:
    """One text for a JSON value read from a canonical file (equal values, equal texts)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _fields(step_id: str, kind: str, tool: str | None, arguments: Any, params: Any) -> str:
    """What a spec step and its plan node share, as one text."""
    return _text([step_id, kind, tool, arguments, params])


def _pair(node_id: str, dep: str) -> int:
    return compact_key(f"{node_id}\n{dep}")  # a step id holds no newline


class _PlanWalk:
    """What ``plan`` finds walking ``spec.json``'s steps, then ``plan.json``'s edges and nodes.

    Kept: the node ids seen (a :class:`~toolproof.verify.base.KeySet`, about 70 bytes a
    node), order-free digests of the steps, of the step nodes and of the edges
    (:class:`~toolproof.verify.compact.Multiset`), each spec ``after`` not yet found
    among its node's dependencies, and the last three nodes.
    """

    def __init__(self, view: RunView, bad: Callable[[str], None]) -> None:
        self.view, self.bad = view, bad
        self.step_ids, self.step_fields = Multiset(), Multiset()
        self.node_ids, self.node_fields = Multiset(), Multiset()
        self.expected, self.edges = Multiset(), Multiset()
        self.afters: dict[int, str] = {}
        self.seen = KeySet()
        self.tail: deque[tuple[str, str]] = deque(maxlen=3)
        self.lacking: list[str] = []
        self.sorted = True

    def walk(self, tools: set[str]) -> None:
        for step in self.view.spec_steps():
            self.step_ids.add(step.id)
            self.step_fields.add(
                _fields(step.id, step.kind, step.tool, step.arguments, step.params)
            )
            for dep in step.after:
                self.afters[_pair(step.id, dep)] = step.id
        last: list[str] | None = None
        for _, _, item in self.view.plan_parts():
            if isinstance(item, list):  # an edge; the edges come first
                self.edges.add(_text(item))
                self.sorted = self.sorted and (last is None or last <= item)
                last = item
            else:
                self._node(item, tools)

    def _node(self, node: PlanNode, tools: set[str]) -> None:
        if node.id in self.seen:
            self.bad(f"node {node.id!r} appears twice")
        missing = [dep for dep in node.depends_on if dep not in self.seen]
        if missing:
            self.bad(f"node {node.id!r} depends on {missing}, which do not come before it")
        self.seen.add(node.id)
        for dep in node.depends_on:
            self.expected.add(_text([dep, node.id]))
        self.tail.append((node.id, node.kind.value))
        if node.kind not in _STEP_KINDS:
            return
        self.node_ids.add(node.id)
        self.node_fields.add(
            _fields(node.id, node.kind.value, node.tool, node.arguments, node.params)
        )
        for dep in node.depends_on:
            self.afters.pop(_pair(node.id, dep), None)
        if node.kind == StepKind.CALL and node.tool not in tools and len(self.lacking) < 50:
            self.lacking.append(
                f"node {node.id!r} calls {node.tool!r}, which the runtime's toolset lacks"
            )

    def differing(self) -> list[str]:
        """The step nodes that differ from their spec step, in plan order (a second walk)."""
        found: dict[str, None] = {}
        if self.node_fields != self.step_fields:
            steps = {
                compact_key(step.id): compact_key(
                    _fields(step.id, step.kind, step.tool, step.arguments, step.params)
                )
                for step in self.view.spec_steps()
            }
            for _, _, node in self.view.plan_parts():
                if isinstance(node, list) or node.kind not in _STEP_KINDS:
                    continue
                step = steps.get(compact_key(node.id))
                fields = _fields(node.id, node.kind.value, node.tool, node.arguments, node.params)
                if step is not None and step != compact_key(fields):
                    found[node.id] = None
        for step_id in self.afters.values():
            if step_id in self.seen:  # a spec after its node does not depend on
                found[step_id] = None
        return list(found)


def check_plan(view: RunView) -> list[Finding] | None:
    """The plan is the spec's: its steps, in a valid order, with the planner's own nodes.

    Both files are read part by part (:class:`_PlanWalk`), not whole: the plan's edges
    are its nodes' dependencies, sorted, when they are in order and the two multisets
    are equal; its step nodes are the spec's steps when their multisets are (a second
    walk names the nodes that differ).
    """
    spec, plan, runtime = view.spec_head, view.plan_head, view.runtime
    if spec is None or plan is None or runtime is None:
        return None
    out: list[Finding] = []

    def bad(message: str) -> None:
        out.append(finding(_CRIT, PLAN_FILE, message + "; re-run the spec to get a sound plan"))

    if plan.task != spec.task:
        bad("the plan's task differs from the spec's task")
    walk = _PlanWalk(view, bad)
    walk.walk({tool.name for tool in runtime.toolset.tools})
    if not walk.sorted or walk.edges != walk.expected:
        bad("the plan's edges do not match its nodes' dependencies")
    if walk.node_ids != walk.step_ids:
        bad("the plan's call/retrieve/model/read/prompt nodes are not the spec's steps")
    for node_id in walk.differing():
        bad(f"node {node_id!r} differs from the spec's step {node_id!r}")
    for message in walk.lacking:
        bad(message)
    if list(walk.tail) != [("derive", "derive"), ("verify", "verify"), ("finalize", "finalize")]:
        bad("the plan does not end with the derive, verify and finalize nodes")
    if runtime.seed != spec.seed:
        out.append(
            finding(_CRIT, RUNTIME_FILE, f"runtime seed {runtime.seed} != spec seed {spec.seed}")
        )
    return out[:MAX_FINDINGS]


class _TraceChain:
    """``trace-chain``: per line, idx and prev; per step, started once and in plan order.

    Keeps the previous line's digest, the open step, the plan's node order and the set
    of steps started so far (a :class:`~toolproof.verify.base.KeySet`: about 70 bytes
    per started step).
    """

    def __init__(self, view: RunView) -> None:
        self.order = view.plan_index  # by compact key of the node id
        self.chain = Findings()
        self.life = Findings()
        self.previous: str | None = None
        self.open_node: str | None = None
        self.started = KeySet()
        self.last_index = -1

    def feed(self, line: TraceLine) -> None:
        event = line.event
        assert event is not None
        if event.idx != line.position:
            self.chain.add(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event at line {line.position + 1} has "
                    f"idx {event.idx}, expected {line.position} (events were "
                    "removed, added or reordered)",
                    event=line.position,
                )
            )
        if event.prev != self.previous:
            self.chain.add(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {line.position} has prev "
                    f"{event.prev}, but the event before hashes to {self.previous} "
                    "(the hash chain is broken)",
                    event=line.position,
                )
            )
        self.previous = line.digest
        self._lifecycle(event)

    def _lifecycle(self, event: TraceEvent) -> None:
        order, out, open_node = self.order, self.life, self.open_node
        where = {"event": event.idx}
        step_key = compact_key(event.step)
        if order is not None and step_key not in order:
            out.add(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {event.idx} names unknown step {event.step!r} (not a plan node)",
                    **where,
                )
            )
        if isinstance(event, StepStarted):
            if open_node is not None or event.step in self.started:
                out.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx} starts step "
                        f"{event.step!r} while {open_node!r} is open or it ran before",
                        **where,
                    )
                )
            last_index = self.last_index
            index = order.get(step_key, last_index) if order else last_index + 1
            if index <= last_index:
                out.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: step {event.step!r} starts out of plan order",
                        **where,
                    )
                )
            self.last_index = max(last_index, index)
            self.started.add(event.step)
            self.open_node = event.step
        elif isinstance(event, RunFailed):
            if open_node is not None:
                out.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: run_failed while step {open_node!r} is open",
                        **where,
                    )
                )
        elif event.step != open_node:
            out.add(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {event.idx} ({event.type}) belongs "
                    f"to step {event.step!r} but step {open_node!r} is open",
                    **where,
                )
            )
        if isinstance(event, StepFinished) and event.step == self.open_node:
            self.open_node = None

    def finish(self) -> list[Finding]:
        return (self.chain + self.life)[:MAX_FINDINGS]


def check_trace_chain(view: RunView) -> list[Finding] | None:
    """``idx`` equals the position, ``prev`` is the digest of the line before, steps nest."""
    return stream_check(view, _TraceChain)


def _stored(view: RunView, key: str) -> bytes | None:
    """The bytes of evidence item ``key`` (``None``: not stored, or unreadable)."""
    try:
        return view.evidence.read(key) if key in view.evidence else None
    except OSError:
        return None


class _CallLinkage:
    """``call-linkage``: keeps the call awaiting its result and every call id seen.

    The call ids as a :class:`~toolproof.verify.base.KeySet` (about 70 bytes per call).

    Each recorded idempotency key names one call and, when recomputable, is its
    formula's (:class:`~toolproof.verify.keys.KeyLedger`, a few strings per keyed call).
    A call that names the model turn that asked for it (``model_turn``) must name a turn
    recorded before it whose response holds its ``model_call_id``
    (:class:`~toolproof.verify.model_calls.ModelLinks`).
    """

    def __init__(self, view: RunView) -> None:
        self.keys = KeyLedger(view.runtime, view.directory)
        self.tools = None
        if view.runtime is not None:
            tools = {tool.name for tool in view.runtime.toolset.tools}
            tools |= {p.name for p in view.runtime.providers if p.kind == MODEL_PROVIDER_KIND}
            self.tools = tools
        self.out = Findings()
        self.pending: ToolCalled | None = None
        self.called = KeySet()
        self.links = ModelLinks(partial(_stored, view))

    def bad(self, idx: int, message: str) -> None:
        self.out.add(finding(_CRIT, TRACE_FILE, f"event {idx}: {message}", event=idx))

    def feed(self, line: TraceLine) -> None:
        event, pending, bad = line.event, self.pending, self.bad
        if event is not None:
            for idx, message in self.links.feed(event):
                bad(idx, message)
        if pending is not None and not (
            isinstance(event, ToolReturned) and event.call_id == pending.call_id
        ):
            bad(pending.idx, f"call {pending.call_id} has no tool_returned right after it")
            pending = self.pending = None
        if isinstance(event, ToolCalled):
            if event.call_id != event.call.id:
                bad(event.idx, f"call_id {event.call_id} is not the call's id {event.call.id}")
            if event.call.step != event.step:
                bad(event.idx, f"the call names step {event.call.step!r}, not {event.step!r}")
            if self.tools is not None and event.call.tool not in self.tools:
                bad(event.idx, f"tool {event.call.tool!r} is not in the runtime's toolset")
            if not self.called.add(event.call_id):
                bad(event.idx, f"call {event.call_id} is made twice")
            self.keys.note(event)
            self.pending = event
        elif isinstance(event, ToolReturned):
            if pending is None:
                bad(event.idx, f"tool_returned for {event.call_id} without a matching call")
            elif event.step != pending.step:
                bad(event.idx, "the result is recorded under another step than its call")
            self.pending = None

    def finish(self) -> list[Finding]:
        if self.pending is not None:
            self.bad(self.pending.idx, f"call {self.pending.call_id} never returned")
        for found in self.keys.findings():
            self.out.add(found)
        return self.out[:MAX_FINDINGS]


def check_call_linkage(view: RunView) -> list[Finding] | None:
    """Each call id is its call's content id, and each call returns exactly once, next."""
    return stream_check(view, _CallLinkage)


class _Links:
    """``support-links``: keeps the ids of calls that returned a value, and of cited evidence.

    The calls of the open step only: a tool result's evidence is registered in its
    call's step (by the one recorder that writes it), so evidence naming a call of
    another step is a finding. Of the evidence registered, only the ids ``claims.json`` cites
    (bounded by its claims): a support the stored claims do not cite belongs to an
    emitted claim that differs from ``claims.json``, which is this check's finding. The
    emitted claims are compared with ``claims.json`` one by one as they come, so they
    are not kept.
    """

    def __init__(self, view: RunView) -> None:
        assert view.claims is not None
        self.stored = view.claims
        self.out = Findings()
        self.ok_calls: set[str] = set()  # of the open step
        self.cited = {support.evidence for claim in self.stored for support in claim.supports}
        self.registered: set[str] = set()
        self.emitted = 0
        self.same = True

    def feed(self, line: TraceLine) -> None:
        event, out = line.event, self.out
        if isinstance(event, StepStarted):
            self.ok_calls.clear()
        elif isinstance(event, ToolReturned) and event.result.ok:
            self.ok_calls.add(event.call_id)
        elif isinstance(event, EvidenceRegistered):
            source = event.evidence.source
            if source.step != event.step:
                out.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: evidence source "
                        f"step {source.step!r} is not {event.step!r}",
                        event=event.idx,
                    )
                )
            if source.kind == "tool_result" and source.call not in self.ok_calls:
                out.add(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: evidence names "
                        f"call {source.call}, which did not return a value before it in its step",
                        event=event.idx,
                    )
                )
            if event.evidence.id in self.cited:
                self.registered.add(event.evidence.id)
        elif isinstance(event, ClaimEmitted):
            number = self.emitted
            self.emitted += 1
            if self.same and (
                number >= len(self.stored)
                or canonical_json(self.stored[number].to_json())
                != canonical_json(event.claim.to_json())
            ):
                self.same = False
            for support in event.claim.supports:
                if support.evidence in self.cited and support.evidence not in self.registered:
                    out.add(
                        finding(
                            _CRIT,
                            TRACE_FILE,
                            f"event {event.idx}: claim "
                            f"{event.claim.id} cites {support.evidence}, which is not "
                            "registered before it",
                            event=event.idx,
                        )
                    )

    def finish(self) -> list[Finding]:
        out = self.out[:]
        if not self.same or self.emitted != len(self.stored):
            out.append(
                finding(
                    _CRIT,
                    CLAIMS_FILE,
                    "claims.json differs from the claims emitted "
                    "in trace.jsonl; one of them was altered",
                )
            )
        return out[:MAX_FINDINGS]


def _links(view: RunView) -> _Links | None:
    return _Links(view) if view.claims is not None else None


def check_links(view: RunView) -> list[Finding] | None:
    """Evidence names its call; claims cite registered evidence; claims.json is the trace's."""
    return stream_check(view, _links)


STREAMS: dict[str, Callable[[RunView], TraceState | None]] = {
    "trace-chain": _TraceChain,
    "call-linkage": _CallLinkage,
    "support-links": _links,
}
"""The trace states of this module's checks, by check id."""
