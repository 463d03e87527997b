"""Structural checks: schema, plan, trace order and chain, call/result linkage, links."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from toolproof.bundle.trace import TraceLine
from toolproof.contract.layout import CLAIMS_FILE, PLAN_FILE, RUN_FILES, RUNTIME_FILE, TRACE_FILE
from toolproof.contract.runs import MODEL_PROVIDER_KIND, Finding, Severity, StepKind
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
from toolproof.verify.base import MAX_FINDINGS, Findings, TraceState, finding, stream_check
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


def _compare_steps(view: RunView, bad: Callable[[str], None]) -> None:
    assert view.spec is not None and view.plan is not None and view.runtime is not None
    spec, plan = view.spec, view.plan
    kinds = (
        StepKind.CALL,
        StepKind.RETRIEVE,
        StepKind.MODEL,
        StepKind.READ,
        StepKind.PROMPT,
    )
    steps = [node for node in plan.nodes if node.kind in kinds]
    if sorted(node.id for node in steps) != sorted(step.id for step in spec.steps):
        bad("the plan's call/retrieve/model/read/prompt nodes are not the spec's steps")
    by_id = {node.id: node for node in steps}
    for step in spec.steps:
        node = by_id.get(step.id)
        if node is None:
            continue
        same = (
            node.kind.value == step.kind
            and node.tool == step.tool
            and node.arguments == step.arguments
            and node.params == step.params
            and set(step.after) <= set(node.depends_on)
        )
        if not same:
            bad(f"node {node.id!r} differs from the spec's step {step.id!r}")
    tools = {tool.name for tool in view.runtime.toolset.tools}
    for node in steps:
        if node.kind == StepKind.CALL and node.tool not in tools:
            bad(f"node {node.id!r} calls {node.tool!r}, which the runtime's toolset lacks")


def check_plan(view: RunView) -> list[Finding] | None:
    """The plan is the spec's: its steps, in a valid order, with the planner's own nodes."""
    spec, plan, runtime = view.spec, view.plan, view.runtime
    if spec is None or plan is None or runtime is None:
        return None
    out: list[Finding] = []

    def bad(message: str) -> None:
        out.append(finding(_CRIT, PLAN_FILE, message + "; re-run the spec to get a sound plan"))

    if plan.task != spec.task:
        bad("the plan's task differs from the spec's task")
    seen: set[str] = set()
    for node in plan.nodes:
        if node.id in seen:
            bad(f"node {node.id!r} appears twice")
        missing = [dep for dep in node.depends_on if dep not in seen]
        if missing:
            bad(f"node {node.id!r} depends on {missing}, which do not come before it")
        seen.add(node.id)
    expected_edges = sorted([dep, node.id] for node in plan.nodes for dep in node.depends_on)
    if plan.edges != expected_edges:
        bad("the plan's edges do not match its nodes' dependencies")
    _compare_steps(view, bad)
    tail = [(node.id, node.kind.value) for node in plan.nodes[-3:]]
    if tail != [("derive", "derive"), ("verify", "verify"), ("finalize", "finalize")]:
        bad("the plan does not end with the derive, verify and finalize nodes")
    if runtime.seed != spec.seed:
        out.append(
            finding(_CRIT, RUNTIME_FILE, f"runtime seed {runtime.seed} != spec seed {spec.seed}")
        )
    return out[:MAX_FINDINGS]


class _TraceChain:
    """``trace-chain``: per line, idx and prev; per step, started once and in plan order.

    Keeps the previous line's digest, the open step, the plan's node order and the set
    of steps started so far (one entry per started step).
    """

    def __init__(self, view: RunView) -> None:
        self.order = view.plan_order
        self.chain = Findings()
        self.life = Findings()
        self.previous: str | None = None
        self.open_node: str | None = None
        self.started: set[str] = set()
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
        if order is not None and event.step not in order:
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
            index = order.get(event.step, last_index) if order else last_index + 1
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
        self.called: set[str] = set()
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
            if event.call_id in self.called:
                bad(event.idx, f"call {event.call_id} is made twice")
            self.called.add(event.call_id)
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
    """``support-links``: keeps the ids of calls that returned a value and of evidence.

    The emitted claims are compared with ``claims.json`` one by one as they come, so
    they are not kept.
    """

    def __init__(self, view: RunView) -> None:
        assert view.claims is not None
        self.stored = view.claims
        self.out = Findings()
        self.ok_calls: set[str] = set()
        self.registered: set[str] = set()
        self.emitted = 0
        self.same = True

    def feed(self, line: TraceLine) -> None:
        event, out = line.event, self.out
        if isinstance(event, ToolReturned) and event.result.ok:
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
                        f"call {source.call}, which did not return a value before it",
                        event=event.idx,
                    )
                )
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
                if support.evidence not in self.registered:
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
